package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/pmem"
)

// The guest side of the fsdax run: `pheap inside` runs the transaction
// workloads in a directory of a DAX filesystem (in the guest: ext4 mounted
// dax=always on an fsdax namespace of an emulated NVDIMM) and prints one
// JSON object between two marker lines on stdout, the serial console, for
// the host (guest.go) to take out. Progress goes to stderr.
const (
	beginMarker = "NVBOOT-PHEAP-JSON-BEGIN"
	endMarker   = "NVBOOT-PHEAP-JSON-END"
)

// insideCommand is the first argument that selects the guest side.
const insideCommand = "inside"

func inside(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench/pheap inside", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "`directory` on a DAX filesystem for every system's files")
	n := fs.Int("n", 2000, "transactions per run")
	runs := fs.Int("runs", 3, "runs of every case (round-robin)")
	bin := fs.String("pmemobj", "", "the libpmemobj `program` (csrc/pmemobj_bench.c, built)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: pheap inside -dir DIR -pmemobj PROGRAM [-n N] [-runs R]\n\nWhat the fsdax guest runs (bench/pheap -guest boots it); not for use by hand.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *bin == "" || *n < 1 || *runs < 1 {
		return fmt.Errorf("inside: -dir %q, -pmemobj %q, -n %d, -runs %d: want a directory, the program, n and runs ≥ 1", *dir, *bin, *n, *runs)
	}
	workloads := []workload{
		{"update64", []txCase{
			{"pheap", createCase(pheapUpdate64), false},
			{"pheap-noflush", pheapCase(false, pheapUpdate64), false},
			{"pmemobj", pmemobjCase(*bin, "update64", nil), false},
			{"bbolt", boltCase(boltUpdate64), false},
		}},
		{"mapinsert", []txCase{
			{"pheap", createCase(pheapMapInsert), false},
			{"pheap-noflush", pheapCase(false, pheapMapInsert), false},
			{"pmemobj", pmemobjCase(*bin, "mapinsert", nil), false},
			{"bbolt", boltCase(boltMapInsert), false},
		}},
	}
	// Under TCG the first run of a case also pays for translating its
	// code: one run of each, not counted, first.
	warm := min(*n, 500)
	fmt.Fprintf(stderr, "warm-up, not counted: every case once, %d transactions\n", warm)
	if _, err := runWorkloads(workloads, 1, warm, *dir, newSamples(), io.Discard); err != nil {
		return err
	}
	s := newSamples()
	modes, err := runWorkloads(workloads, *runs, *n, *dir, s, stderr)
	if err != nil {
		return err
	}
	if err := runPaired(*runs, *n, *dir, s, stderr); err != nil {
		return err
	}
	o := output{Bench: "pheap-fsdax", Ratios: fsdaxRatios(s), Results: s.Results(), Env: guestEnvironment(*dir, *n, *runs)}
	for sys, m := range modes {
		o.Env["mode_"+sys] = m
	}
	fmt.Fprintln(stdout, beginMarker)
	if err := writeJSON(stdout, o); err != nil {
		return err
	}
	fmt.Fprintln(stdout, endMarker)
	return nil
}

// fsdaxRatios are issue 5's ratios on one DAX filesystem: pheap.Create's
// heap (MAP_SYNC, CPU flushes), libpmemobj's pool and bbolt's database with
// its fsync per commit all on the same mount.
func fsdaxRatios(s *samples) map[string]float64 {
	thr := func(w, sys string) float64 { return s.Median(w + "_" + sys + "_throughput") }
	return map[string]float64{
		"tx_throughput_vs_bbolt":                    thr("update64", "pheap") / thr("update64", "bbolt"),
		"map_throughput_vs_bbolt":                   thr("mapinsert", "pheap") / thr("mapinsert", "bbolt"),
		"tx_throughput_vs_pmemobj_fsdax":            thr("update64", "pheap") / thr("update64", "pmemobj"),
		"map_throughput_vs_pmemobj_fsdax":           thr("mapinsert", "pheap") / thr("mapinsert", "pmemobj"),
		"durability_overhead_fsdax":                 thr("mapinsert", "pheap-noflush")/thr("mapinsert", "pheap") - 1,
		"durability_overhead_update64_fsdax":        thr("update64", "pheap-noflush")/thr("update64", "pheap") - 1,
		"durability_overhead_fsdax_paired":          s.Median("mapinsert_pheap_paired_durability_overhead"),
		"durability_overhead_update64_fsdax_paired": s.Median("update64_pheap_paired_durability_overhead"),
	}
}

// guestEnvironment says where the guest's numbers come from.
func guestEnvironment(dir string, n, runs int) map[string]string {
	env := map[string]string{
		"dir":   dir,
		"flush": pmem.Method(),
		"go":    runtime.Version(),
		"cpus":  fmt.Sprint(runtime.NumCPU()),
		"date":  time.Now().UTC().Format(time.RFC3339),
		"n":     fmt.Sprint(n),
		"runs":  fmt.Sprint(runs),
		"mount": benchjson.MountOf(dir),
	}
	benchjson.AddSystem(env)
	return env
}

// parseGuest takes the inside command's JSON object out of a console.
func parseGuest(console string) (output, error) {
	var o output
	_, rest, ok := strings.Cut(console, beginMarker+"\n")
	if !ok {
		return o, errors.New("no " + beginMarker + " line on the console")
	}
	body, _, ok := strings.Cut(rest, "\n"+endMarker)
	if !ok {
		return o, errors.New("no " + endMarker + " line on the console")
	}
	if err := decodeOutput(strings.NewReader(body), &o); err != nil {
		return o, fmt.Errorf("the guest's JSON: %w", err)
	}
	return o, nil
}
