// Command exec measures program start time with OFF2F against plain ELF, side
// by side in one run, and reports ratios (docs/DEVICE-CLOCK.md#measuring-method).
//
//	go run ./bench/exec [-json] [-runs N] [-vm=true|false] [-storage sd,nvme] [-quick]
//
// It builds three static programs from the sources under bench/exec (big: a
// generated Go program with over 20 MiB of text+rodata whose start-up touches
// nearly all of it; mid: a Go service-like program; tiny: a `true` in C), lays
// each out several ways (ELF on storage, OFF2F header on storage with the text
// in a store, whole ELF on DAX pmem, ELF on tmpfs) and times exec → exit, cold
// (page cache dropped before every run) and warm, round-robin across layouts:
// first on this host (text store on tmpfs: the host has no pmem), then in QEMU
// guests whose program disk is throttled to an SD card, eMMC or NVMe profile and
// whose text store is ext4 -o dax=always on an emulated NVDIMM. A make-like
// shell loop of many short starts is timed the same way.
//
// Needs root (to drop caches), gcc, and for the VM part QEMU and the appliance
// kernel (kernel-config/build.sh, or $NVBOOT_KERNEL).
package main

import (
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/cli"

	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode(err, os.Stderr, "bench/exec"))
}

// config is everything the command line sets.
type config struct {
	JSON     bool     // one JSON object on stdout instead of the table
	Runs     int      // cold runs per case; 0: the default of the place (host 10, VM 5; -quick 2)
	VM       bool     // also measure inside QEMU guests
	Host     bool     // measure on this host
	Storage  []string // VM storage profiles, one guest boot each
	Quick    bool     // small big program, few runs, one VM profile: proves the benchmark works
	Prefault bool     // convert with -prefault (text mapped with MAP_POPULATE)
	DiskDir  string   // host storage: a directory on this machine's disk
	TmpfsDir string   // host tmpfs: programs, the measurer, the tmpfs layout, the host text store
	Kernel   string   // guest kernel; default $NVBOOT_KERNEL, then kernel-config/build.sh
	Keep     bool     // keep the work directories
	CPURate  int64    // VM: the device clock's instructions per second; 0: the wall clock
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: go run ./bench/exec [flags]

Times program start (exec to exit) of ELF and OFF2F layouts side by side and
reports the ratios. Needs root (drops the page cache before cold runs).

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, `
Examples:
  go run ./bench/exec                          # host + VM (sd, nvme), about 15 minutes
  go run ./bench/exec -json -runs 20 > out.json
  go run ./bench/exec -vm=false                # host only, a few minutes
  go run ./bench/exec -storage sd,emmc,nvme -keep
  go run ./bench/exec -quick -json             # what the test runs
  go run ./bench/exec -host=false -cpu-rate 1e9   # VM on the device clock: a 1-GIPS core
`)
	}
	storage := "sd,nvme"
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object on stdout (progress stays on stderr)")
	fs.IntVar(&c.Runs, "runs", 0, "cold runs per program and layout (warm: 5x, tiny warm: 20x); default host 10, VM 5, -quick 2")
	fs.BoolVar(&c.VM, "vm", true, "also measure in QEMU guests (DAX text store, throttled program disk)")
	fs.BoolVar(&c.Host, "host", true, "measure on this host")
	fs.StringVar(&storage, "storage", storage, "comma-separated VM storage `profiles` (sd, emmc, nvme, host); one guest boot each")
	fs.BoolVar(&c.Quick, "quick", false, "small programs, few runs, one VM profile (the first of -storage): checks the benchmark works")
	fs.BoolVar(&c.Prefault, "prefault", false, "convert OFF2F programs with -prefault (MAP_POPULATE the text)")
	fs.StringVar(&c.DiskDir, "disk-dir", "/var/tmp", "host `dir` on this machine's disk for the storage layouts")
	fs.StringVar(&c.TmpfsDir, "tmpfs-dir", "/dev/shm", "host `dir` on tmpfs for the tmpfs layouts and the host text store")
	fs.StringVar(&c.Kernel, "kernel", "", "guest `bzImage` (default $NVBOOT_KERNEL, then kernel-config/build.sh)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the work directories (printed on stderr)")
	rate := fs.Float64("cpu-rate", 0, "VM: run the guests on the device clock (QEMU -icount) at this many `instructions/s` (1e9 divided by a power of two), so their timings are a device's, not the emulator's; 0: the wall clock")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (try -h)", fs.Args())
	}
	if *rate != 0 {
		c.CPURate = int64(*rate)
		if _, err := vm.ICountShift(c.CPURate); err != nil || float64(c.CPURate) != *rate {
			return nil, fmt.Errorf("-cpu-rate %g: want 1e9 divided by a power of two (1e9, 5e8, 2.5e8, ...)", *rate)
		}
	}
	for _, s := range strings.Split(storage, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.Storage = append(c.Storage, s)
		}
	}
	if c.VM && len(c.Storage) == 0 {
		return nil, errors.New("-storage names no profile")
	}
	if c.Quick && len(c.Storage) > 1 {
		c.Storage = c.Storage[:1]
	}
	if c.Runs < 0 {
		return nil, fmt.Errorf("-runs %d: want a positive number", c.Runs)
	}
	if !c.Host && !c.VM {
		return nil, errors.New("-host=false and -vm=false: nothing to measure")
	}
	return c, nil
}

// counts is how many times each kind of group runs at one place.
type counts struct {
	Cold, Warm, TinyWarm int // timed runs per case
	Make                 int // timed runs of the make-like loop per layout
	MakeIters            int // loop iterations (each starts tiny and mid once)
}

func countsFor(c *config, vm bool) counts {
	n := c.Runs
	if n == 0 {
		switch {
		case c.Quick:
			n = 2
		case vm:
			n = 5
		default:
			n = 10
		}
	}
	k := counts{Cold: n, Warm: 5 * n, TinyWarm: 20 * n, Make: max(3, n/2), MakeIters: 100}
	if vm {
		k.MakeIters = 25 // 50 starts: each Go start costs tens of ms under TCG
	}
	if c.Quick {
		k.Warm, k.TinyWarm, k.Make, k.MakeIters = n, 2*n, 1, 3
	}
	return k
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root: cold starts drop the page cache (/proc/sys/vm/drop_caches)")
	}
	log := cli.NewProgress(stderr)
	ram, err := os.MkdirTemp(c.TmpfsDir, "nvboot-bench-exec-")
	if err != nil {
		return err
	}
	if c.Keep {
		log.Printf("work directory (tmpfs): %s", ram)
	} else {
		defer os.RemoveAll(ram)
	}
	if err := requireFS(ram, true); err != nil {
		return err
	}
	progs, err := buildPrograms(ctx, c, ram, log)
	if err != nil {
		return err
	}
	rep := &report{Progs: progs}
	if c.Host {
		pl, err := runHost(ctx, c, progs, ram, log)
		if err != nil {
			return fmt.Errorf("host: %w", err)
		}
		rep.Places = append(rep.Places, pl)
	}
	if c.VM {
		for _, profile := range c.Storage {
			pl, err := runVM(ctx, c, progs, ram, profile, log)
			if err != nil {
				return fmt.Errorf("vm (%s): %w", profile, err)
			}
			rep.Places = append(rep.Places, pl)
		}
	}
	if err := rep.checkOutputs(); err != nil {
		return err
	}
	log.Printf("done")
	if c.JSON {
		return rep.writeJSON(stdout)
	}
	return rep.writeTable(stdout)
}
