package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/pheap"
	"github.com/nvboot/nvboot/pmem"
)

// txCase is one system running one transaction workload on a fresh file.
type txCase struct {
	system string
	run    func(dir string, n int) (timing, error)
	counts bool // report the fences and lines flushed per transaction
}

// workload is one transaction workload and the systems that run it.
type workload struct {
	name  string
	cases []txCase
}

// heapSize is the heap of a run of n transactions: 64 MiB, or 1 KiB a
// transaction for long runs (the map's growing tables, 80 bytes a slot, and
// their free lists).
func heapSize(n int) int { return max(64<<20, (n<<10+(2<<20)-1)&^(2<<20-1)) }

// pheapCase runs a workload on a heap over pmemFile: flushes on or off, the
// durability work counted.
func pheapCase(flush bool, work func(*pheap.Heap, int) (timing, error)) func(string, int) (timing, error) {
	return func(dir string, n int) (timing, error) {
		h, pf, done, err := newPmemHeap(filepath.Join(dir, "bench.heap"), heapSize(n), flush)
		if err != nil {
			return timing{}, err
		}
		defer done()
		f0, l0 := pf.fences, pf.lines
		t, err := work(h, n)
		t.fences, t.lines = float64(pf.fences-f0)/float64(n), float64(pf.lines-l0)/float64(n)
		t.mode = h.Mode()
		return t, err
	}
}

// createCase runs a workload on pheap.Create's heap, the production path:
// MAP_SYNC and CPU flushes on a DAX filesystem, msync elsewhere.
func createCase(work func(*pheap.Heap, int) (timing, error)) func(string, int) (timing, error) {
	return func(dir string, n int) (timing, error) {
		path := filepath.Join(dir, "bench-create.heap")
		os.Remove(path)
		h, err := pheap.Create(path, int64(heapSize(n)))
		if err != nil {
			return timing{}, err
		}
		defer os.Remove(path)
		defer h.Close()
		t, err := work(h, n)
		t.mode = h.Mode()
		return t, err
	}
}

func boltCase(work func(db *boltDB, n int) (timing, error)) func(string, int) (timing, error) {
	return func(dir string, n int) (timing, error) {
		db, done, err := openBolt(filepath.Join(dir, "bench.bolt"))
		if err != nil {
			return timing{}, err
		}
		defer done()
		t, err := work(db, n)
		t.mode = "fsync per commit"
		return t, err
	}
}

func pmemobjCase(bin, work string, env []string) func(string, int) (timing, error) {
	return func(dir string, n int) (timing, error) {
		return runPmemobj(bin, work, filepath.Join(dir, "bench.pool"), n, env)
	}
}

// runWorkloads runs every case of every workload runs times, round-robin,
// n transactions each on fresh files in dir, and adds the figures to s. It
// returns the durability mode each system reported.
func runWorkloads(ws []workload, runs, n int, dir string, s *samples, progress io.Writer) (map[string]string, error) {
	modes := map[string]string{}
	for r := range runs {
		for _, w := range ws {
			for _, tc := range w.cases {
				fmt.Fprintf(progress, "run %d/%d: %s %s, %d transactions\n", r+1, runs, w.name, tc.system, n)
				t, err := tc.run(dir, n)
				if err != nil {
					return nil, fmt.Errorf("%s on %s in %s: %w", w.name, tc.system, dir, err)
				}
				s.Add(w.name+"_"+tc.system+"_throughput", "tx/s", float64(n)/t.total.Seconds())
				s.Add(w.name+"_"+tc.system+"_latency_p50", "µs", float64(t.p50)/1e3)
				if tc.counts {
					s.Add(w.name+"_"+tc.system+"_fences_per_tx", "fences/tx", t.fences)
					s.Add(w.name+"_"+tc.system+"_lines_flushed_per_tx", "lines/tx", t.lines)
				}
				if old, ok := modes[tc.system]; ok && old != t.mode {
					return nil, fmt.Errorf("%s on %s: durability mode %q, earlier %q", w.name, tc.system, t.mode, old)
				}
				modes[tc.system] = t.mode
			}
		}
	}
	return modes, nil
}

// runPaired adds runs paired durability overheads of both workloads to s.
func runPaired(runs, n int, dir string, s *samples, progress io.Writer) error {
	for r := range runs {
		for _, w := range []struct {
			name string
			step func(*pheap.Heap) (func(int) error, error)
		}{{"update64", update64Step}, {"mapinsert", mapInsertStep}} {
			fmt.Fprintf(progress, "run %d/%d: %s durable and no-flush in alternating blocks of %d, %d transactions each\n", r+1, runs, w.name, pairedBlock, n)
			ov, err := pairedOverhead(dir, n, w.step)
			if err != nil {
				return fmt.Errorf("%s paired in %s: %w", w.name, dir, err)
			}
			s.Add(w.name+"_pheap_paired_durability_overhead", "ratio", ov)
		}
	}
	return nil
}

// measure runs everything on this machine, in c.Dir.
func measure(c config, progress io.Writer) (output, error) {
	o := output{Bench: "pheap", Ratios: map[string]float64{}, Env: environment(c)}
	work, err := os.MkdirTemp(c.Dir, "bench-pheap-")
	if err != nil {
		return o, err
	}
	defer os.RemoveAll(work)
	bin, err := buildPmemobj(work)
	if err != nil {
		return o, err
	}
	workloads := []workload{
		{"update64", []txCase{
			{"pheap", pheapCase(true, pheapUpdate64), true},
			{"pheap-noflush", pheapCase(false, pheapUpdate64), false},
			{"pheap-msync", createCase(pheapUpdate64), false},
			{"pmemobj", pmemobjCase(bin, "update64", pmemForced), false},
			{"pmemobj-noflush", pmemobjCase(bin, "update64", pmemForcedNoFlush), false},
			{"bbolt", boltCase(boltUpdate64), false},
		}},
		{"mapinsert", []txCase{
			{"pheap", pheapCase(true, pheapMapInsert), true},
			{"pheap-noflush", pheapCase(false, pheapMapInsert), false},
			{"pheap-msync", createCase(pheapMapInsert), false},
			{"pmemobj", pmemobjCase(bin, "mapinsert", pmemForced), false},
			{"pmemobj-noflush", pmemobjCase(bin, "mapinsert", pmemForcedNoFlush), false},
			{"bbolt", boltCase(boltMapInsert), false},
		}},
	}
	s := newSamples()
	modes, err := runWorkloads(workloads, c.Runs, c.N, work, s, progress)
	if err != nil {
		return o, err
	}
	for sys, m := range modes {
		o.Env["mode_"+sys] = m
	}
	if err := runPaired(c.Runs, c.N, work, s, progress); err != nil {
		return o, err
	}
	if err := runChurn(c.N, s, progress); err != nil {
		return o, err
	}
	if err := runChecksum(c.Runs, c.N, work, s, progress); err != nil {
		return o, err
	}
	if err := measureOpen(c, work, s, progress); err != nil {
		return o, err
	}
	o.Results = s.Results()
	thr := func(w, sys string) float64 { return s.Median(w + "_" + sys + "_throughput") }
	o.Ratios["tx_throughput_vs_pmemobj"] = thr("update64", "pheap") / thr("update64", "pmemobj")
	o.Ratios["map_throughput_vs_pmemobj"] = thr("mapinsert", "pheap") / thr("mapinsert", "pmemobj")
	// bbolt's fsync on tmpfs costs nothing: not the same-storage figure of
	// issue 5, which the guest gives (tx_throughput_vs_bbolt).
	o.Ratios["tx_throughput_vs_bbolt_tmpfs"] = thr("update64", "pheap") / thr("update64", "bbolt")
	o.Ratios["map_throughput_vs_bbolt_tmpfs"] = thr("mapinsert", "pheap") / thr("mapinsert", "bbolt")
	o.Ratios["durability_overhead"] = thr("mapinsert", "pheap-noflush")/thr("mapinsert", "pheap") - 1
	o.Ratios["durability_overhead_update64"] = thr("update64", "pheap-noflush")/thr("update64", "pheap") - 1
	o.Ratios["pmemobj_durability_overhead"] = thr("mapinsert", "pmemobj-noflush")/thr("mapinsert", "pmemobj") - 1
	o.Ratios["pmemobj_durability_overhead_update64"] = thr("update64", "pmemobj-noflush")/thr("update64", "pmemobj") - 1
	o.Ratios["durability_overhead_paired"] = s.Median("mapinsert_pheap_paired_durability_overhead")
	o.Ratios["durability_overhead_update64_paired"] = s.Median("update64_pheap_paired_durability_overhead")
	o.Ratios["tx_throughput_msync_vs_bbolt"] = thr("update64", "pheap-msync") / thr("update64", "bbolt")
	// The allocator and the checksums (issue 19): the smallest fraction of
	// the heap values of one size fill after the churn, and what checksums
	// add to a put and get of 4 KiB values (and to the get alone).
	o.Ratios["churn_allocatable_fraction"] = 1.0
	for _, sz := range churnSizes {
		o.Ratios["churn_allocatable_fraction"] = min(o.Ratios["churn_allocatable_fraction"], s.Median("churn_allocatable_fraction_"+sz.name))
	}
	o.Ratios["churn_fragmentation"] = s.Median("churn_fragmentation")
	o.Ratios["checksum_overhead"] = s.Median("checksum_overhead_4KiB")
	o.Ratios["checksum_overhead_get"] = s.Median("checksum_overhead_get_4KiB")
	o.Ratios["checksum_overhead_64KiB"] = s.Median("checksum_overhead_64KiB")
	big := sizeName(c.Big)
	open := func(sys, size string) float64 { return s.Median("open_first_read_" + sys + "_" + size) }
	o.Ratios["open_first_read_"+big+"_vs_1MiB"] = open("pheap", big) / open("pheap", "1MiB")
	o.Ratios["open_first_read_vs_bbolt_"+big] = open("pheap", big) / open("bbolt", big)
	o.Ratios["open_first_read_vs_gob_"+big] = open("pheap", big) / open("gob", big)
	return o, nil
}

// measureOpen fills the stores of both sizes, then times open-to-first-read
// round-robin.
func measureOpen(c config, work string, s *samples, progress io.Writer) error {
	var sets []openFiles
	var names []string
	for _, size := range []int64{1 << 20, c.Big} {
		fmt.Fprintf(progress, "filling a %s heap, bbolt database and gob snapshot\n", sizeName(size))
		f, err := fillOpen(work, sizeName(size), size)
		if err != nil {
			return err
		}
		sets = append(sets, f)
		names = append(names, sizeName(size))
	}
	for r := range c.Runs {
		for i, f := range sets {
			fmt.Fprintf(progress, "run %d/%d: open to first read, %s (%d values)\n", r+1, c.Runs, names[i], f.keys)
			for _, sys := range []struct {
				name string
				open func(string) (time.Duration, error)
				path string
			}{{"pheap", openPheap, f.heap}, {"bbolt", openBoltRead, f.bolt}, {"gob", openGob, f.gob}} {
				runtime.GC() // the gob decoder's garbage is not the next case's cost
				d, err := sys.open(sys.path)
				if err != nil {
					return fmt.Errorf("open to first read, %s: %w", sys.name, err)
				}
				s.Add("open_first_read_"+sys.name+"_"+names[i], "ms", float64(d)/1e6)
			}
		}
	}
	return nil
}

func sizeName(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprint(n)
}

// environment says where the numbers come from.
func environment(c config) map[string]string {
	env := map[string]string{
		"dir":     c.Dir,
		"flush":   pmem.Method(),
		"go":      runtime.Version(),
		"cpus":    fmt.Sprint(runtime.NumCPU()),
		"date":    time.Now().UTC().Format(time.RFC3339),
		"n":       fmt.Sprint(c.N),
		"runs":    fmt.Sprint(c.Runs),
		"storage": fsType(c.Dir),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				env["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	return env
}

func fsType(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown: " + err.Error()
	}
	switch st.Type {
	case unix.TMPFS_MAGIC:
		return dir + " (tmpfs)"
	case unix.EXT4_SUPER_MAGIC:
		return dir + " (ext4)"
	}
	return fmt.Sprintf("%s (filesystem type %#x)", dir, st.Type)
}
