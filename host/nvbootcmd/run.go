package nvbootcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/cli"
)

const runDescription = `Boots an image built by 'nvboot build' in QEMU: the disk image as a virtio
disk throttled to the storage model, pmem-text.img and pmem-state.img as
the machine's persistent memory (e820 regions, emulated NVDIMMs with -pmem
nvdimm, or virtio-pmem devices with -pmem virtio, where the kernel refuses
MAP_SYNC and kv's heap makes each write durable with the device's flush
request; their contents persist from run to run), the serial console on this terminal, and the
services' ports forwarded from the host (each ForwardPort to the same host
port unless -port says otherwise). QEMU uses KVM only when it really works
here, TCG otherwise.
An arm64-virt image boots on QEMU's virt board. A Raspberry Pi card (target
arm64-rpi) is refused, naming it: QEMU's raspi3b board runs none of the Pi's
firmware, which picks the boot partition and loads the kernel from it; write
the card with 'nvboot flash' (measure and powercut refuse it too).

-firmware uefi boots DIR as a board boots it, which an image built with
Slots 2 needs for 'nvboot update': UEFI firmware (OVMF, Debian package
ovmf; for an arm64 image AAVMF, Debian package qemu-efi-aarch64) runs the
unified kernel image on disk.img (with Slots 2, the slot its boot
variables choose), the board has an i6300esb watchdog, and the pmem images
are emulated NVDIMMs described by the firmware's ACPI tables, or on x86
virtio-pmem devices with -pmem virtio (the disk's command line has no
memmap= for e820 regions, and the firmware gives an arm64 kernel no device
tree: -pmem e820 and -append are refused). The firmware's
variables (BootOrder, BootNext, the slots' entries) are DIR/uefi-vars.fd,
made blank on the first such run and kept, as disk.img is: what an update
writes to the disk and the variables stays for the next run, as on a
flashed card in a board. A guest reset (a typed 'reboot', an update's
reboot, the watchdog, a panic with panic=) restarts the board in the same
QEMU, firmware first, and the run goes on; only a power-off ends it. (QEMU
without -no-reboot: QEMU itself tells a reset from a power-off, where a
runner starting QEMU again would have to guess it from the console.) The
default, -firmware direct, plays the firmware instead: QEMU hands the
image's kernel and command line over (-kernel) as the UKI would, and a
reboot ends the run.

-board microvm boots the image on QEMU's microvm machine instead of its pc
machine: what a Firecracker guest looks like (no PCI devices, virtio on
virtio-mmio, the kernel entered directly). Its pmem is e820 regions only
(it maps no NVDIMM or virtio-pmem device), it has no UEFI firmware, and
under TCG it runs on the device clock, its default there (see
docs/DEVICE-CLOCK.md for why each).

An image built with Userland "u-root" has u-root's shell (gosh) on the
console, its commands in /bbin; without one (Userland "none", the default)
the console takes only nvinit's commands. In both, typing 'poweroff' (or
'reboot') and Enter on the console asks nvinit to shut down cleanly ('start
NAME' starts a stopped service); Ctrl-C (or SIGTERM, SIGHUP) does the same as
'poweroff', and cuts the
power if the guest has not powered off 10 s later; a second Ctrl-C cuts it
at once. (QEMU runs in a process group of its own: the terminal's Ctrl-C
reaches nvboot, not QEMU, which would end on it at once, a power cut.)

-mem, -accel, -clock, the forwarded host ports and disk.img (against its
partition table and image.json: a truncated one would boot into a kernel
panic) are checked before QEMU starts: a host port already in use is an
error naming it. A guest kernel panic ends the run at once, the error
carrying the panic line and its likely cause.

While it runs, nvboot run holds DIR's lock: a second run of DIR, a
powercut of it or a build into it is refused, naming the process holding
it (and a run of a DIR being built or run is refused the same way).

-shared-text runs one of many guests of one image: the image's text store
(DIR/pmem-text.img) is mapped into the guest read-only, shared with every
other guest of DIR (QEMU maps the one file: the texts are in the host's
memory once, in its page cache), and the guest's kernel sees a read-only
device (an unarmed NVDIMM: a write fails with EPERM), which nvinit never
writes (no provisioning, no repair, no deploy). The guest's own pmem (its
state, the kernel region) is in -guest GDIR, made from the image's the first
time and kept from run to run (without -guest: a temporary directory,
removed at the end), and disk.img is attached read-only. The pmem images are
NVDIMMs (an e820 region cannot tell the guest it is read-only: -pmem e820
is refused). DIR's lock is held shared: other -shared-text runs of DIR go
on beside this one, a run of DIR without it or a build into it is refused;
GDIR's lock is held as DIR's is by a run without it. One of many, the guest
costs the host what it uses: it has a virtio-balloon with free page
reporting (QEMU gives back what the guest's kernel frees), its RAM in
4 KiB pages, and under TCG a 16 MiB translation cache (QEMU's default
grew to 94 MiB in the big appliance's boot).
Not the default: a run
without it keeps deploying into the image's own store (nvboot deploy), and
boots on e820 pmem without ACPI, about 40 ms of a 1-GIPS boot sooner.

` + clockHelp

const runExamples = `  nvboot run out/demo
  nvboot run -storage sd -port 18080:8080 out/demo     # then: curl localhost:18080/kv/x
  nvboot run -storage nvme out/demo
  nvboot run -clock device -append "initcall_debug loglevel=7" out/demo   # profile the boot on the guest's clock
  nvboot run -shared-text -guest g1 -port 18080:8080 out/demo   # two guests of one image, one text store;
  nvboot run -shared-text -guest g2 -port 18081:8080 out/demo   # (from another terminal) each its own state
  nvboot run -firmware uefi -port 18080:8080 -port 18081:80 out/ab   # a Slots 2 image through UEFI; then:
  nvboot update -config ab.json out/ab2 http://localhost:18081        # (from another terminal) the board reboots into out/ab2`

func runCmd(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "nvboot run", "nvboot run [-firmware F] [-storage P] [-port H:G ...] DIR", runDescription, runExamples)
	storage := fs.String("storage", "host", "disk speed model: "+strings.Join(vm.ProfileNames(), ", "))
	firmware := fs.String("firmware", firmwareDirect, "how the board boots: `direct` (QEMU hands the image's kernel over; a reboot ends the run) or uefi (OVMF, arm64: AAVMF, boots disk.img as a board does, its variables kept in DIR/"+outdir.UEFIVarsFile+", resets restart the board: what nvboot update of a Slots 2 image needs)")
	var ports portList
	fs.Var(&ports, "port", "forward host TCP port H to guest port G (`H:G`, repeatable); default: every ForwardPort")
	shared := fs.Bool("shared-text", false, "map the image's text store read-only, shared with every other guest of the image; this guest's own pmem in -guest")
	guest := fs.String("guest", "", "with -shared-text: this guest's own pmem `directory` (state, kernel region), made from the image's the first time and kept; empty: a temporary one, removed at the end")
	mf := addMachineFlags(fs, vm.ClockWall)
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
	mach, err := mf.resolve()
	if err != nil {
		return err
	}
	uefi, err := checkFirmware(*firmware, fs)
	if err != nil {
		return err
	}
	if err := checkSharedText(*shared, *guest, uefi, fs); err != nil {
		return err
	}
	if *shared {
		mach.PmemAs = vm.PmemNVDIMM
	}
	im, err := appliance.ReadImage(dir)
	if err != nil {
		return err
	}
	if err := appliance.CheckBootable(dir, im); err != nil {
		return err
	}
	var pmemDir string
	if *shared {
		// Guests of the image read it; each writes only its own pmem.
		unlock, err := appliance.LockImageShared(dir)
		if err != nil {
			return err
		}
		defer unlock()
		g, done, err := guestPmem(*guest, dir, im, c.Stderr)
		if err != nil {
			return err
		}
		defer done()
		pmemDir = g
	} else {
		// The guest writes the pmem images in place: no second VM on them,
		// and no build replacing them, until it is off.
		unlock, err := appliance.LockImage(dir)
		if err != nil {
			return err
		}
		defer unlock()
	}
	fwd := []vm.Forward(ports)
	from := "-port %d:%d"
	if len(fwd) == 0 {
		from = "the image's ForwardPort %[2]d"
		for _, s := range im.Services {
			if s.ForwardPort != 0 {
				fwd = append(fwd, vm.Forward{Host: s.ForwardPort, Guest: s.ForwardPort})
			}
		}
	}
	// QEMU would start, and the guest's console say nothing, before
	// failing on a host port it cannot bind.
	if err := checkHostPorts(fwd, from); err != nil {
		return err
	}
	in, inject := io.Pipe()
	go func() { io.Copy(inject, c.Stdin) }()
	opts := mach.BootOptions(prof)
	opts.Forwards, opts.Console, opts.Stdin = fwd, c.Stdout, in
	opts.SharedText, opts.PmemDir = *shared, pmemDir
	cfg, err := runVMConfig(dir, im, opts, uefi)
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
	if uefi {
		fmt.Fprintf(c.Stderr, "nvboot run: UEFI firmware (%s) boots %s, its variables in %s; a reboot restarts the board\n", vm.UEFIOf(cfg.Arch).Name, cfg.Disks[0].Path, cfg.FirmwareVars)
	} else if k, err := appliance.BootKernelOf(dir, im, opts); err == nil {
		fmt.Fprintf(c.Stderr, "nvboot run: %s\n", k.Describe())
	}
	fmt.Fprintf(c.Stderr, "nvboot run: %s (%s), storage %s; %s; 'poweroff' or Ctrl-C to stop\n", dir, mach.String(m.Accel), prof.Name, consoleText(im.Userland))
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

// absPath is p absolute and clean (p itself when that fails).
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// checkSharedText checks -shared-text and -guest against the other flags
// of fs.
func checkSharedText(shared bool, guest string, uefi bool, fs *flag.FlagSet) error {
	if !shared {
		if guest != "" {
			return cli.Usagef("-guest %s without -shared-text: a guest of its own text store runs on the image's own pmem", guest)
		}
		return nil
	}
	if uefi {
		return cli.Usagef("-shared-text with -firmware uefi: an A/B update writes the disk, which every guest of the image reads")
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "pmem" && f.Value.String() == vm.PmemE820 {
			err = cli.Usagef("-shared-text with -pmem e820: an e820 region cannot tell the guest it is read-only (the kernel would take writes QEMU then drops); leave -pmem out (the pmem images are then NVDIMMs)")
		}
	})
	return err
}

// guestPmem is the pmem directory of a guest of a shared text store: dir
// (made from the image's pmem the first time, kept, and locked as an
// image directory is while the guest runs), or with dir empty a temporary
// one, removed by done.
func guestPmem(dir, image string, im *appliance.Image, log io.Writer) (path string, done func(), err error) {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "nvboot-guest-")
		if err != nil {
			return "", nil, err
		}
		if err := appliance.CopyGuestPmem(image, im, tmp); err != nil {
			os.RemoveAll(tmp)
			return "", nil, err
		}
		fmt.Fprintf(log, "nvboot run: this guest's state is in %s, removed at the end (-guest DIR keeps it)\n", tmp)
		return tmp, func() { os.RemoveAll(tmp) }, nil
	}
	if a, b := absPath(dir), absPath(image); a == b || strings.HasPrefix(a, b+string(filepath.Separator)) {
		return "", nil, cli.Usagef("-guest %s: inside the image directory %s, which a build replaces whole; give the guest a directory of its own", dir, image)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("-guest %s: %w", dir, err)
	}
	unlock, err := appliance.LockImage(dir)
	if err != nil {
		return "", nil, fmt.Errorf("-guest %s: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, outdir.StatePmemFile)); errors.Is(err, os.ErrNotExist) {
		if err := appliance.CopyGuestPmem(image, im, dir); err != nil {
			unlock()
			return "", nil, fmt.Errorf("-guest %s: %w", dir, err)
		}
		fmt.Fprintf(log, "nvboot run: this guest's state is new in %s, made from %s's\n", dir, image)
	} else {
		fmt.Fprintf(log, "nvboot run: this guest's state is in %s, as its last run left it\n", dir)
	}
	return dir, unlock, nil
}

// -firmware's values.
const (
	firmwareDirect = "direct"
	firmwareUEFI   = "uefi"
)

// checkFirmware checks -firmware against the other flags of fs and says
// whether the board boots through UEFI.
func checkFirmware(name string, fs *flag.FlagSet) (bool, error) {
	switch name {
	case firmwareDirect:
		return false, nil
	case firmwareUEFI:
	default:
		return false, cli.Usagef("-firmware %q: want %s or %s", name, firmwareDirect, firmwareUEFI)
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "pmem" && f.Value.String() == vm.PmemE820:
			err = cli.Usagef("-pmem e820 with -firmware uefi: the disk's kernel command line has no memmap= for e820 regions; leave -pmem out (the pmem images are then NVDIMMs)")
		case f.Name == "board" && f.Value.String() == vm.BoardMicrovm:
			err = cli.Usagef("-board microvm with -firmware uefi: QEMU's microvm runs its own firmware (bios-microvm.bin), which boots the kernel directly; no UEFI firmware boots disk.img there")
		case f.Name == "append" && f.Value.String() != "":
			err = cli.Usagef("-append with -firmware uefi: the firmware boots the command line built into the disk's kernel image; rebuild with the arguments in KernelCmdline")
		}
	})
	if err != nil {
		return false, err
	}
	return true, nil
}

// runVMConfig is the machine nvboot run boots the image in dir on: with
// uefi a UEFI board (uefiBoard: the image's board's firmware, which must
// be installed) booting the image's own disk.img, its variable store
// beside it (made blank the first time), its pmem NVDIMMs unless o asks
// for virtio-pmem (which OVMF and the UKI's kernel serve: kv answered 204s
// there, tried by hand), and resets that restart it; else what VMConfig
// makes of o.
func runVMConfig(dir string, im *appliance.Image, o appliance.BootOptions, uefi bool) (vm.Config, error) {
	if !uefi {
		return appliance.VMConfig(dir, im, o)
	}
	// The disk's own command line has no memmap=, and a disk read from
	// pmem is for the device clock's -kernel boots.
	o.BootDisk, o.DiskAsPmem = true, false
	if o.PmemAs != vm.PmemVirtio {
		o.PmemAs = vm.PmemNVDIMM
	}
	c, err := appliance.VMConfig(dir, im, o)
	if err != nil {
		return vm.Config{}, err
	}
	if err := vm.UEFIOf(c.Arch).Installed(); err != nil {
		return vm.Config{}, fmt.Errorf("-firmware uefi: %w", err)
	}
	vars := filepath.Join(dir, outdir.UEFIVarsFile)
	if _, err := vm.NewFirmwareVars(c.Arch, vars); err != nil {
		return vm.Config{}, fmt.Errorf("image %s: %w", dir, err)
	}
	uefiBoard(&c, vars)
	c.Reboot = true
	return c, nil
}

// uefiBoard makes c the UEFI board an A/B image expects: its board's
// firmware code (OVMF's; the arm64 board's AAVMF's) and the variable store
// vars (a copy of the blank one: vm.NewFirmwareVars) as its flash, so the
// boot variables persist, and the i6300esb watchdog nvinit arms on a
// slotted boot.
func uefiBoard(c *vm.Config, vars string) {
	c.Firmware, c.FirmwareVars, c.Watchdog = vm.UEFIOf(c.Arch).Code, vars, true
}

// consoleText says what the console of an image with this userland takes.
func consoleText(userland string) string {
	if userland == "" {
		return "no shell on the console (Userland none): it takes poweroff, reboot and start NAME"
	}
	return "the console is a " + userland + " shell"
}

// minMemMiB is the least guest RAM -mem takes: a floor against typos (0,
// a negative number, KiB for MiB), well below what the appliance is run
// with (512 by default).
const minMemMiB = 64

// checkMem checks -mem: at least minMemMiB, at most the host's RAM.
func checkMem(mib int) error {
	if mib < minMemMiB {
		return cli.Usagef("-mem %d: want at least %d (MiB)", mib, minMemMiB)
	}
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil {
		if host := uint64(si.Totalram) * uint64(si.Unit) >> 20; host > 0 && uint64(mib) > host {
			return cli.Usagef("-mem %d: more than this host's %d MiB of RAM", mib, host)
		}
	}
	return nil
}

// checkAccel checks -accel: empty, tcg, or kvm when KVM really works here.
func checkAccel(accel string) error {
	switch accel {
	case "", "tcg":
		return nil
	case "kvm":
		if ok, why := vm.KVMUsable("qemu-system-x86_64"); !ok {
			return fmt.Errorf("-accel kvm: KVM does not work here (%s): use -accel tcg, or leave -accel out to pick what works", why)
		}
		return nil
	}
	return cli.Usagef("-accel %q: want kvm or tcg (or nothing: KVM when it really works here)", accel)
}

// checkHostPorts checks that each forward's host port is free on 127.0.0.1
// (where QEMU listens) and used once; from formats where a forward came
// from (Host, Guest as arguments) for the error.
func checkHostPorts(fwd []vm.Forward, from string) error {
	seen := map[int]bool{}
	for _, f := range fwd {
		where := fmt.Sprintf(from, f.Host, f.Guest)
		if seen[f.Host] {
			return cli.Usagef("%s: host port %d is forwarded twice", where, f.Host)
		}
		seen[f.Host] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", f.Host))
		if err != nil {
			return fmt.Errorf("%s: host port %d is not free (%v): stop what uses it, or pick another with -port HOST:%d", where, f.Host, err, f.Guest)
		}
		l.Close()
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
	if !ok {
		return fmt.Errorf("%q: want HOSTPORT:GUESTPORT, e.g. 18080:8080", v)
	}
	hp, err := parsePort("host", h)
	if err != nil {
		return fmt.Errorf("%q: %w", v, err)
	}
	gp, err := parsePort("guest", g)
	if err != nil {
		return fmt.Errorf("%q: %w", v, err)
	}
	*p = append(*p, vm.Forward{Host: hp, Guest: gp})
	return nil
}

// parsePort reads a TCP port number; which ("host", "guest") names it in
// the error, which says whether it is no number or out of range.
func parsePort(which, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s port %q is not a number: want HOSTPORT:GUESTPORT, e.g. 18080:8080", which, s)
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("%s port %d is out of range: want 1 to 65535", which, n)
	}
	return n, nil
}
