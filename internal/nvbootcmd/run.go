package nvbootcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/image/appliance"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/vm"
)

const runDescription = `Boots an image built by 'nvboot build' in QEMU: the disk image as a virtio
disk throttled to the storage model, pmem-text.img and pmem-state.img as
emulated NVDIMMs (their contents persist from run to run: that is the
device's persistent memory), the serial console on this terminal, and the
services' ports forwarded from the host (each ForwardPort to the same host
port unless -port says otherwise). QEMU uses KVM only when it really works
here, TCG otherwise.

Typing 'poweroff' (or 'reboot') and Enter on the console asks nvinit to
shut down cleanly; Ctrl-C does the same, and cuts the power if the guest
has not powered off 10 s later.`

const runExamples = `  nvboot run out/demo
  nvboot run -storage sd -port 18080:8080 out/demo     # then: curl localhost:18080/kv/x
  nvboot run -storage nvme out/demo`

func runCmd(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "nvboot run", "nvboot run [-storage P] [-port H:G ...] DIR", runDescription, runExamples)
	storage := fs.String("storage", "host", "disk speed model: "+strings.Join(vm.ProfileNames(), ", "))
	var ports portList
	fs.Var(&ports, "port", "forward host TCP port H to guest port G (`H:G`, repeatable); default: every ForwardPort")
	mem := fs.Int("mem", 512, "guest RAM in `MiB`")
	accel := fs.String("accel", "", "kvm or tcg; empty: KVM when it really works here")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("want one image directory")
	}
	dir := fs.Arg(0)
	prof, err := vm.Profile(*storage)
	if err != nil {
		return cli.Usagef("-storage: %v", err)
	}
	im, err := appliance.ReadImage(dir)
	if err != nil {
		return err
	}
	fwd := []vm.Forward(ports)
	if len(fwd) == 0 {
		for _, s := range im.Services {
			if s.ForwardPort != 0 {
				fwd = append(fwd, vm.Forward{Host: s.ForwardPort, Guest: s.ForwardPort})
			}
		}
	}
	in, inject := io.Pipe()
	go func() { io.Copy(inject, c.Stdin) }()
	cfg, err := appliance.VMConfig(dir, im, appliance.BootOptions{Storage: prof, Forwards: fwd, MemMiB: *mem,
		Accel: *accel, Console: c.Stdout, Stdin: in})
	if err != nil {
		return err
	}
	// QEMU must outlive ctx: Ctrl-C asks for a clean power-off first.
	m, err := vm.Start(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return err
	}
	defer m.Kill()
	for _, f := range fwd {
		fmt.Fprintf(c.Stderr, "nvboot run: host 127.0.0.1:%d -> guest :%d\n", f.Host, f.Guest)
	}
	fmt.Fprintf(c.Stderr, "nvboot run: %s (%s), storage %s; 'poweroff' or Ctrl-C to stop\n", dir, m.Accel, prof.Name)
	select {
	case <-m.Done():
		return m.Wait(context.Background())
	case <-ctx.Done():
	}
	fmt.Fprintf(c.Stderr, "\nnvboot run: powering off\n")
	go inject.Write([]byte("\npoweroff\n"))
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		fmt.Fprintf(c.Stderr, "nvboot run: no power-off after 10 s; cutting the power\n")
		m.Kill()
	}
	err = m.Wait(context.Background())
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// portList is repeated -port H:G flags.
type portList []vm.Forward

func (p *portList) String() string {
	var s []string
	for _, f := range *p {
		s = append(s, fmt.Sprintf("%d:%d", f.Host, f.Guest))
	}
	return strings.Join(s, ",")
}

func (p *portList) Set(v string) error {
	h, g, ok := strings.Cut(v, ":")
	hp, err1 := strconv.Atoi(h)
	gp, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || hp < 1 || hp > 65535 || gp < 1 || gp > 65535 {
		return fmt.Errorf("%q: want HOSTPORT:GUESTPORT", v)
	}
	*p = append(*p, vm.Forward{Host: hp, Guest: gp})
	return nil
}
