// Command firmware measures the appliance's boot from power-on under the
// device clock, through each firmware path: the disk image booted by UEFI
// firmware (OVMF reads the unified kernel image from the EFI system
// partition, as a board does) against QEMU's -kernel boots (SeaBIOS,
// qboot), side by side in one run (docs/BENCHMARKS.md, "Firmware: the disk
// boot path").
//
//	go run ./bench/firmware [-json] [-runs N] [-firmware seabios,qboot,ovmf] [-storage sd]
//
// Every boot runs under TCG with -icount (vm.Config.CPURate: by default one
// instruction is one nanosecond of guest time), the disk throttled to the
// storage profile. nvinit's marks tie the guest's clocks to its TSC, which
// counts guest time since power-on (bootmark.PlaceGuest), so each stage is
// guest time since power-on, whatever the host's speed or load.
//
// Needs QEMU, OVMF (Debian package ovmf) and the appliance kernel
// ($NVBOOT_KERNEL, or -kernel).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"

	"github.com/nvboot/nvboot/host/kernel"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode(err, os.Stderr, "bench/firmware"))
}

// firmware is one boot path.
type firmware struct {
	Name  string
	About string
	File  string // vm.Config.Firmware; "": QEMU's SeaBIOS
	Disk  bool   // boot the disk image (no -kernel)
}

// firmwares are the paths -firmware can name, in report order.
var firmwares = []firmware{
	{Name: "seabios", About: "SeaBIOS (QEMU's default), -kernel bzImage"},
	{Name: "qboot", About: "qboot, -kernel bzImage", File: vm.QBoot},
	{Name: "ovmf-kernel", About: "OVMF, -kernel bzImage (QEMU hands the kernel over, no disk read)", File: vm.OVMF},
	{Name: "ovmf", About: "OVMF boots disk.img: EFI/BOOT/BOOTX64.EFI (UKI) from the ESP", File: vm.OVMF, Disk: true},
}

func lookupFirmware(name string) (firmware, error) {
	for _, f := range firmwares {
		if f.Name == name {
			return f, nil
		}
	}
	var names []string
	for _, f := range firmwares {
		names = append(names, f.Name)
	}
	return firmware{}, fmt.Errorf("firmware %q: unknown (want one of %s)", name, strings.Join(names, ", "))
}

// options is everything the command line sets.
type options struct {
	JSON      bool
	Runs      int
	Firmwares []firmware
	Storage   vm.Storage
	CPURate   int64
	Kernel    string
	Keep      bool
	NICROM    bool     // the network card's option ROM (iPXE), as QEMU loads it by default
	QEMUArgs  []string // more QEMU arguments for every boot
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	c := &options{}
	fs := flag.NewFlagSet("firmware", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: go run ./bench/firmware [flags]

Builds the demo appliance and boots it through each firmware path, N cold
boots each, interleaved, under the device clock (TCG, -icount), and reports
guest time from power-on to the kernel's handover to init, nvinit's start,
kv ready and kv's first answer.

Paths (-firmware):
`)
		for _, f := range firmwares {
			fmt.Fprintf(stderr, "  %-12s %s\n", f.Name, f.About)
		}
		fmt.Fprintf(stderr, "\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(stderr, `
Examples:
  go run ./bench/firmware                                  # seabios, qboot, ovmf; 3 boots each
  go run ./bench/firmware -firmware seabios,ovmf-kernel,ovmf -runs 5 -json > out.json
  go run ./bench/firmware -storage host -runs 1            # unthrottled disk
`)
	}
	names := "seabios,qboot,ovmf"
	storage := "sd"
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object on stdout (progress stays on stderr)")
	fs.IntVar(&c.Runs, "runs", 3, "cold boots per firmware path")
	fs.StringVar(&names, "firmware", names, "comma-separated firmware `paths` (seabios, qboot, ovmf-kernel, ovmf)")
	fs.StringVar(&storage, "storage", storage, "storage `profile` of the disk (sd, emmc, nvme, host)")
	fs.Int64Var(&c.CPURate, "cpu-rate", vm.DefaultCPURate, "guest instructions per second of guest time (1e9 divided by a power of two)")
	fs.StringVar(&c.Kernel, "kernel", "", "appliance `bzImage` (default $NVBOOT_KERNEL)")
	fs.BoolVar(&c.NICROM, "nic-rom", true, "give the network card QEMU's option ROM (iPXE), which the firmware runs; false: none, as on a board without network boot")
	fs.BoolVar(&c.Keep, "keep", false, "keep the work directory (printed on stderr)")
	qemuArgs := ""
	fs.StringVar(&qemuArgs, "qemu-args", "", "more QEMU `arguments` for every boot, space-separated (experiments: another device, another -global)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (try -h)", fs.Args())
	}
	c.QEMUArgs = strings.Fields(qemuArgs)
	if c.Runs < 1 {
		return nil, fmt.Errorf("-runs %d: want at least 1", c.Runs)
	}
	for _, n := range strings.Split(names, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		f, err := lookupFirmware(n)
		if err != nil {
			return nil, fmt.Errorf("-firmware: %w", err)
		}
		if !slices.Contains(c.Firmwares, f) {
			c.Firmwares = append(c.Firmwares, f)
		}
	}
	if len(c.Firmwares) == 0 {
		return nil, errors.New("-firmware names no path")
	}
	var err error
	if c.Storage, err = vm.Profile(storage); err != nil {
		return nil, fmt.Errorf("-storage: %w", err)
	}
	if _, err := vm.ICountShift(c.CPURate); err != nil {
		return nil, fmt.Errorf("-cpu-rate: %w", err)
	}
	// Checked when it boots: the flags are checked without a kernel too.
	c.Kernel = cmp.Or(c.Kernel, os.Getenv(kernel.EnvVar))
	if c.Kernel == "" {
		return nil, errors.New("no kernel: set NVBOOT_KERNEL (export NVBOOT_KERNEL=$(kernel-config/build.sh)/bzImage) or pass -kernel")
	}
	for _, f := range c.Firmwares {
		if f.File == "" {
			continue
		}
		if _, err := os.Stat(f.File); err != nil {
			return nil, fmt.Errorf("-firmware %s: %w (OVMF: Debian package ovmf; qboot: qemu-system-data)", f.Name, err)
		}
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := cli.NewProgress(stderr)
	work, err := os.MkdirTemp("", "nvboot-bench-firmware-")
	if err != nil {
		return err
	}
	if c.Keep {
		log.Printf("work directory: %s", work)
	} else {
		defer os.RemoveAll(work)
	}
	rep, err := measure(ctx, c, work, log)
	if err != nil {
		return err
	}
	log.Printf("done")
	if c.JSON {
		return rep.writeJSON(stdout)
	}
	return rep.writeTable(stdout)
}
