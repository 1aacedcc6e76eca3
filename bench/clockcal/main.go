// Command clockcal calibrates the device clock against real hardware: it
// runs one measurer, a fixed set of user-space workloads of the kind an
// appliance's boot does, natively on this machine and in a QEMU guest on
// the device clock, side by side in one run, and reports how many times
// longer each takes on the model's 1-GIPS core than on one core of this
// host (docs/DEVICE-CLOCK.md#the-device-clock).
//
//	go run ./bench/clockcal [-json] [-runs 5] [-dir /dev/shm] [-quick]
//	                        [-guest auto|on|off|only] [-kernel bzImage] [-clock device|wall] [-cpu-rate 1e9]
//
// The workloads (workloads.go), one untimed run each, then -runs
// round-robin, medians:
//   - exec_exit: exec of a static Go program that exits at once, waited
//     for (fork, exec, page faults, the Go runtime's start);
//   - kv_fresh, kv_existing: examples/kv from exec to "serving on" (its
//     heap open, the port listening), creating its 64 MiB heap on tmpfs,
//     then opening the one it made;
//   - sha256: SHA-256 of 4 MiB (compute);
//   - memcopy: copying 64 MiB (memory bandwidth);
//   - randread: 2^20 dependent random reads over a 64 MiB table (memory
//     latency: every read a cache and TLB miss on real hardware);
//   - pheap_tx: 1000 pheap transactions, each a 64-byte value put under a
//     new key into a map, flushed (CLWB) and fenced as on DAX, on tmpfs.
//
// Each run is timed twice by the measurer: its wall clock (time.Now; in
// the guest the TSC, which on the device clock counts guest nanoseconds),
// and the CPU time the work took, the measurer's (CLOCK_PROCESS_CPUTIME_ID)
// and the started program's (its rusage, or kv's process CPU clock when it
// says it listens). The ratios are of CPU time, because the device has one
// core and nothing else to run: on a shared host the wall clock also
// counts the time the work waited behind other jobs (measured on a
// 2-core host with a load of 7 to 10, over 15 runs: a workload's wall
// times spread up to 19× from fastest to slowest, its CPU times up to
// 3.8×; in the guest the two agree within 0.1 % for work in the
// measurer, within 20 % for exec).
//
// Both sides run the same static builds (the measurer, bench/clockcal/exit,
// examples/kv), with GOMAXPROCS=1 (the guest has one CPU), files on tmpfs
// (the host's -dir, the guest's /tmp). The guest runs first; the host's
// measurer then gets GODEBUG=cpu.X=off for each feature Go picks code by
// that the guest's CPU lacks (SHA-NI, ERMS and FSRM under QEMU 7.2's TCG
// on the device clock), so both sides run the same instructions in user
// space; env's host_godebug says which. The kernels differ (the host's
// and the appliance's), and so does their code for exec, faults and
// tmpfs.
//
// Ratios: device_vs_host.<workload>, the guest's median CPU time over the
// host's, and device_vs_host_wall.<workload> of wall times (on the wall
// clock: emulator_vs_host*). Results: host.<workload> and
// device.<workload> (emulator.*), CPU time in ms, and each with .wall.
// Env: the host's CPU model and MHz from /proc/cpuinfo, whether it is a
// virtual machine's (cpu_hypervisor), its kernel, THP setting and the
// GODEBUG above, the guest's the same as guest_*, the clock and cpu_rate,
// and what each workload is (workload.<name>).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/guestrun"
	"github.com/nvboot/nvboot/internal/cli"
)

func main() {
	os.Exit(cli.ExitCode(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr, "bench/clockcal"))
}

// config is everything the command line sets.
type config struct {
	JSON    bool
	Runs    int
	Dir     string // the host's tmpfs for heap files
	Quick   bool
	Guest   string // auto, on, off, only
	Kernel  string
	Clock   *guestrun.Clock
	CPURate int64 // the guest's vm.Config.CPURate: 0 on the wall clock
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == insideCommand {
		return inside(args[1:], stdout, stderr)
	}
	c, err := parseFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	o, err := measureAll(c, stderr)
	if err != nil {
		return err
	}
	if c.JSON {
		return benchjson.WriteJSON(stdout, o)
	}
	return benchjson.WriteTable(stdout, o)
}

func parseFlags(args []string, stdout, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("bench/clockcal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object on stdout")
	fs.IntVar(&c.Runs, "runs", 5, "timed runs of every workload on each side, round-robin")
	fs.StringVar(&c.Dir, "dir", "/dev/shm", "the host's `directory` for heap files: a tmpfs, as the guest's /tmp")
	fs.BoolVar(&c.Quick, "quick", false, "1 run; no guest unless -guest on or only")
	fs.StringVar(&c.Guest, "guest", "auto", "the run in a QEMU guest: `auto`, on, off or only")
	fs.StringVar(&c.Kernel, "kernel", "", "guest `bzImage` (default $NVBOOT_KERNEL, then the kernel-config/ cache; never built here)")
	c.Clock = guestrun.AddClockFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stdout, `Usage: go run ./bench/clockcal [flags]

How far the device clock (QEMU -icount: an in-order core at 1 GIPS, no
caches) is from this machine's CPU: the same workloads, the same static
builds, timed natively here and in a guest on the device clock; the ratio
device_vs_host.<workload> is the guest's time over the host's
(docs/DEVICE-CLOCK.md).

Flags:
`)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fmt.Fprintf(stdout, `
Examples:
  go run ./bench/clockcal -quick -guest off      # seconds, host only
  go run ./bench/clockcal -json > docs/results/clockcal.json
`)
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (try -h)", fs.Arg(0))
	}
	if c.Quick {
		c.Runs = 1
	}
	if c.Runs < 1 {
		return c, fmt.Errorf("-runs %d: want at least 1", c.Runs)
	}
	var err error
	if c.CPURate, err = c.Clock.CPURate(); err != nil {
		return c, err
	}
	if c.Guest != "only" {
		if st, err := os.Stat(c.Dir); err != nil {
			return c, fmt.Errorf("-dir: %w", err)
		} else if !st.IsDir() {
			return c, fmt.Errorf("-dir %s: not a directory", c.Dir)
		}
	}
	return c, nil
}

// measureAll builds the programs, runs the guest side, then the host's,
// and puts them together.
func measureAll(c config, progress io.Writer) (benchjson.Output, error) {
	kernel, err := guestrun.Plan(c.Guest, c.Kernel, c.Quick, "bench/clockcal", progress)
	if err != nil {
		return benchjson.Output{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	work, err := os.MkdirTemp("", "bench-clockcal-")
	if err != nil {
		return benchjson.Output{}, err
	}
	defer os.RemoveAll(work)
	b, err := build(ctx, work)
	if err != nil {
		return benchjson.Output{}, err
	}
	var guest, host *benchjson.Output
	var accel string
	if kernel != "" {
		g, a, err := measureGuest(ctx, c, kernel, b, progress)
		if err != nil {
			return benchjson.Output{}, err
		}
		guest, accel = &g, a
	}
	if c.Guest != "only" {
		godebug := ""
		if guest != nil {
			cpuinfo, err := os.ReadFile("/proc/cpuinfo")
			if err != nil {
				return benchjson.Output{}, err
			}
			hc, err := parseCPUInfo(string(cpuinfo))
			if err != nil {
				return benchjson.Output{}, fmt.Errorf("/proc/cpuinfo: %w", err)
			}
			godebug = matchGODEBUG(hc, strings.Fields(guest.Env["cpu_flags"]))
		}
		h, err := measureHost(ctx, c, b, godebug, progress)
		if err != nil {
			return benchjson.Output{}, err
		}
		host = &h
	}
	o := combine(host, guest, c.Clock.Name)
	if guest != nil {
		o.Env["guest_kernel_image"] = kernel
		o.Env["guest_accel"] = accel
		c.Clock.Env(o.Env, "")
	}
	o.Env["date"] = time.Now().UTC().Format(time.RFC3339)
	o.Env["host_goarch"] = runtime.GOARCH
	for _, w := range workloads(fullSizes, programs{}, "") {
		o.Env["workload."+w.name] = w.what
	}
	return o, nil
}

// combine names the two sides' figures and their ratios: host.<w>, and
// device.<w> on the device clock (emulator.<w> on the wall clock, where
// the guest's time is the emulator's); each ratio is the guest's median
// over the host's. Either side may be absent.
func combine(host, guest *benchjson.Output, clock string) benchjson.Output {
	o := benchjson.Output{Bench: "clockcal", Env: map[string]string{}, Ratios: map[string]float64{}}
	side := "device"
	if clock != "device" {
		side = "emulator"
	}
	hostMedian := map[string]float64{}
	if host != nil {
		for _, r := range host.Results {
			hostMedian[r.Name] = r.Median
			r.Name = "host." + r.Name
			o.Results = append(o.Results, r)
		}
		for k, v := range host.Env {
			o.Env["host_"+k] = v
		}
	}
	if guest != nil {
		for _, r := range guest.Results {
			if h, ok := hostMedian[r.Name]; ok && h > 0 {
				if w, ok := strings.CutSuffix(r.Name, wallSuffix); ok {
					o.Ratios[side+"_vs_host_wall."+w] = r.Median / h
				} else {
					o.Ratios[side+"_vs_host."+r.Name] = r.Median / h
				}
			}
			r.Name = side + "." + r.Name
			o.Results = append(o.Results, r)
		}
		for k, v := range guest.Env {
			o.Env["guest_"+k] = v
		}
	}
	return o
}
