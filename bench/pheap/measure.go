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
	"github.com/nvboot/nvboot/pheap/pmem"
)

// txCase is one system running one transaction workload on a fresh file.
type txCase struct {
	system string
	run    func(dir string, n int) (timing, error)
}

const heapSize = 64 << 20

func pheapCase(flush bool, work func(*pheap.Heap, int) (timing, error)) func(string, int) (timing, error) {
	return func(dir string, n int) (timing, error) {
		h, pf, done, err := newPmemHeap(filepath.Join(dir, "bench.heap"), heapSize, flush)
		if err != nil {
			return timing{}, err
		}
		defer done()
		f0, l0 := pf.fences, pf.lines
		t, err := work(h, n)
		t.fences, t.lines = float64(pf.fences-f0)/float64(n), float64(pf.lines-l0)/float64(n)
		return t, err
	}
}

func msyncCase(work func(*pheap.Heap, int) (timing, error)) func(string, int) (timing, error) {
	return func(dir string, n int) (timing, error) {
		path := filepath.Join(dir, "bench-msync.heap")
		os.Remove(path)
		h, err := pheap.Create(path, heapSize)
		if err != nil {
			return timing{}, err
		}
		defer os.Remove(path)
		defer h.Close()
		return work(h, n)
	}
}

func boltCase(work func(db *boltDB, n int) (timing, error)) func(string, int) (timing, error) {
	return func(dir string, n int) (timing, error) {
		db, done, err := openBolt(filepath.Join(dir, "bench.bolt"))
		if err != nil {
			return timing{}, err
		}
		defer done()
		return work(db, n)
	}
}

func pmemobjCase(bin, work string, noFlush bool) func(string, int) (timing, error) {
	return func(dir string, n int) (timing, error) {
		return runPmemobj(bin, work, filepath.Join(dir, "bench.pool"), n, noFlush)
	}
}

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
	workloads := []struct {
		name  string
		cases []txCase
	}{
		{"update64", []txCase{
			{"pheap", pheapCase(true, pheapUpdate64)},
			{"pheap-noflush", pheapCase(false, pheapUpdate64)},
			{"pheap-msync", msyncCase(pheapUpdate64)},
			{"pmemobj", pmemobjCase(bin, "update64", false)},
			{"pmemobj-noflush", pmemobjCase(bin, "update64", true)},
			{"bbolt", boltCase(boltUpdate64)},
		}},
		{"mapinsert", []txCase{
			{"pheap", pheapCase(true, pheapMapInsert)},
			{"pheap-noflush", pheapCase(false, pheapMapInsert)},
			{"pheap-msync", msyncCase(pheapMapInsert)},
			{"pmemobj", pmemobjCase(bin, "mapinsert", false)},
			{"pmemobj-noflush", pmemobjCase(bin, "mapinsert", true)},
			{"bbolt", boltCase(boltMapInsert)},
		}},
	}
	s := newSamples()
	for r := range c.Runs {
		for _, w := range workloads {
			for _, tc := range w.cases {
				fmt.Fprintf(progress, "run %d/%d: %s %s, %d transactions\n", r+1, c.Runs, w.name, tc.system, c.N)
				t, err := tc.run(work, c.N)
				if err != nil {
					return o, fmt.Errorf("%s on %s: %w", w.name, tc.system, err)
				}
				s.add(w.name+"_"+tc.system+"_throughput", "tx/s", float64(c.N)/t.total.Seconds())
				s.add(w.name+"_"+tc.system+"_latency_p50", "µs", float64(t.p50)/1e3)
				if tc.system == "pheap" {
					s.add(w.name+"_pheap_fences_per_tx", "fences/tx", t.fences)
					s.add(w.name+"_pheap_lines_flushed_per_tx", "lines/tx", t.lines)
				}
			}
		}
	}
	for r := range c.Runs {
		for _, w := range []struct {
			name string
			step func(*pheap.Heap) (func(int) error, error)
		}{{"update64", update64Step}, {"mapinsert", mapInsertStep}} {
			fmt.Fprintf(progress, "run %d/%d: %s durable and no-flush in alternating blocks of %d, %d transactions each\n", r+1, c.Runs, w.name, pairedBlock, c.N)
			ov, err := pairedOverhead(work, c.N, w.step)
			if err != nil {
				return o, fmt.Errorf("%s paired: %w", w.name, err)
			}
			s.add(w.name+"_pheap_paired_durability_overhead", "ratio", ov)
		}
	}
	if err := measureOpen(c, work, s, progress); err != nil {
		return o, err
	}
	o.Results = s.results()
	thr := func(w, sys string) float64 { return s.median(w + "_" + sys + "_throughput") }
	o.Ratios["tx_throughput_vs_pmemobj"] = thr("update64", "pheap") / thr("update64", "pmemobj")
	o.Ratios["tx_throughput_vs_bbolt"] = thr("update64", "pheap") / thr("update64", "bbolt")
	o.Ratios["map_throughput_vs_pmemobj"] = thr("mapinsert", "pheap") / thr("mapinsert", "pmemobj")
	o.Ratios["map_throughput_vs_bbolt"] = thr("mapinsert", "pheap") / thr("mapinsert", "bbolt")
	o.Ratios["durability_overhead"] = thr("mapinsert", "pheap-noflush")/thr("mapinsert", "pheap") - 1
	o.Ratios["durability_overhead_update64"] = thr("update64", "pheap-noflush")/thr("update64", "pheap") - 1
	o.Ratios["pmemobj_durability_overhead"] = thr("mapinsert", "pmemobj-noflush")/thr("mapinsert", "pmemobj") - 1
	o.Ratios["pmemobj_durability_overhead_update64"] = thr("update64", "pmemobj-noflush")/thr("update64", "pmemobj") - 1
	o.Ratios["durability_overhead_paired"] = s.median("mapinsert_pheap_paired_durability_overhead")
	o.Ratios["durability_overhead_update64_paired"] = s.median("update64_pheap_paired_durability_overhead")
	o.Ratios["tx_throughput_msync_vs_bbolt"] = thr("update64", "pheap-msync") / thr("update64", "bbolt")
	big := sizeName(c.Big)
	open := func(sys, size string) float64 { return s.median("open_first_read_" + sys + "_" + size) }
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
				s.add("open_first_read_"+sys.name+"_"+names[i], "ms", float64(d)/1e6)
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
		"dir":        c.Dir,
		"flush":      pmem.Method(),
		"go":         runtime.Version(),
		"cpus":       fmt.Sprint(runtime.NumCPU()),
		"date":       time.Now().UTC().Format(time.RFC3339),
		"n":          fmt.Sprint(c.N),
		"runs":       fmt.Sprint(c.Runs),
		"storage":    fsType(c.Dir),
		"pheap_mode": "forced-pmem (CPU flushes on a shared tmpfs mapping); pheap-msync: " + msyncMode(c.Dir),
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

// msyncMode reports the mode pheap.Create picks in dir.
func msyncMode(dir string) string {
	path := filepath.Join(dir, fmt.Sprintf("bench-mode-%d.heap", os.Getpid()))
	defer os.Remove(path)
	h, err := pheap.Create(path, pheap.MinSize)
	if err != nil {
		return "unknown: " + err.Error()
	}
	defer h.Close()
	return h.Mode()
}
