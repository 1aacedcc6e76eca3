package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/nvboot/nvboot/format/benchjson"
)

// The measurer: `clockcal inside` runs the workloads where it is (on the
// host, or in the guest on the device clock), times each with its own
// clock, and prints one benchjson.Output line between markers on stdout.
// The command runs the same static build of it on both sides.
const (
	insideCommand = "inside"
	jsonBegin     = "BENCH-CLOCKCAL-JSON<<"
	jsonEnd       = ">>BENCH-CLOCKCAL-JSON"
	wallSuffix    = ".wall"
)

func inside(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench/clockcal inside", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "a `directory` on tmpfs for the heap files")
	runs := fs.Int("runs", 5, "timed runs of every workload, round-robin, after one untimed")
	var p programs
	fs.StringVar(&p.Exit, "exit", "", "bench/clockcal/exit, built static")
	fs.StringVar(&p.KV, "kv", "", "examples/kv, built static")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: clockcal inside -dir DIR -exit PROGRAM -kv PROGRAM [-runs N]\n\nWhat bench/clockcal runs on the host and in its guest; not for use by hand.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || p.Exit == "" || p.KV == "" || *runs < 1 || fs.NArg() > 0 {
		return fmt.Errorf("inside: -dir %q, -exit %q, -kv %q, -runs %d, arguments %q: want a directory, both programs, runs ≥ 1 and no arguments", *dir, p.Exit, p.KV, *runs, fs.Args())
	}
	o, err := measure(fullSizes, p, *dir, *runs, stderr)
	if err != nil {
		return err
	}
	return writeMarked(stdout, o)
}

// writeMarked prints o as one line between the markers.
func writeMarked(w io.Writer, o benchjson.Output) error {
	var b strings.Builder
	if err := benchjson.WriteJSON(&b, o); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s%s%s\n", jsonBegin, strings.ReplaceAll(strings.TrimSpace(b.String()), "\n", " "), jsonEnd)
	return err
}

// measure prepares every workload, runs each once untimed (page cache,
// the first faults, and under TCG the translation of its code), then
// runs times round-robin, and returns each workload's CPU time (named
// after it) and wall time (wallSuffix) in ms.
func measure(sz sizes, p programs, dir string, runs int, progress io.Writer) (benchjson.Output, error) {
	o := benchjson.Output{Bench: "clockcal-inside", Env: environment(dir), Ratios: map[string]float64{}}
	work, err := os.MkdirTemp(dir, "clockcal-")
	if err != nil {
		return o, fmt.Errorf("-dir: %w", err)
	}
	defer os.RemoveAll(work)
	ws := workloads(sz, p, work)
	for _, w := range ws {
		if w.prepare == nil {
			continue
		}
		if err := w.prepare(); err != nil {
			return o, fmt.Errorf("%s: preparing: %w", w.name, err)
		}
	}
	s := benchjson.NewSamples()
	for r := -1; r < runs; r++ {
		for _, w := range ws {
			d, err := w.run()
			if err != nil {
				return o, fmt.Errorf("%s: %w", w.name, err)
			}
			if r >= 0 {
				s.Add(w.name, "ms", float64(d.cpu)/float64(time.Millisecond))
				s.Add(w.name+wallSuffix, "ms", float64(d.wall)/float64(time.Millisecond))
			}
		}
		if r >= 0 {
			fmt.Fprintf(progress, "clockcal: run %d of %d done\n", r+1, runs)
		}
	}
	o.Results = s.Results()
	o.Env["runs"] = fmt.Sprint(runs)
	return o, nil
}

// environment says where the figures were taken.
func environment(dir string) map[string]string {
	env := map[string]string{
		"go":         runtime.Version(),
		"gomaxprocs": fmt.Sprint(runtime.GOMAXPROCS(0)),
		"godebug":    os.Getenv("GODEBUG"),
		"mount":      benchjson.MountOf(dir),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if c, err := parseCPUInfo(string(b)); err == nil {
			env["cpu_model"], env["cpu_mhz"] = c.Model, c.MHz
			env["cpu_flags"] = strings.Join(c.goFlags(), " ")
			// A virtual machine's CPU: its page walks are nested, so
			// TLB misses and page faults cost more than on bare metal.
			env["cpu_hypervisor"] = fmt.Sprint(c.Flags["hypervisor"])
		}
	}
	benchjson.AddSystem(env)
	return env
}
