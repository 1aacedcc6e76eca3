package main

import (
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/nvboot/nvboot/internal/pheapchecksums"
	"github.com/nvboot/nvboot/pheap"
)

// The checksum workload (issue 19, item 3): what the checksums cost. A
// kv-like step puts a value in one of 64 slots (a durable transaction that
// frees the value it replaces: NewBytes, Free) and reads another back
// (Bytes.Lookup). The same steps run on two durable heaps (flushes on, as
// the pheap case) in alternating blocks of pairedBlock steps, n each, so
// drifting load slows both alike: on one with the checksums, on the other
// with internal/pheapchecksums.NoChecksums set while its blocks run (no data
// checksum computed on the put nor verified on the read, no header
// checksum verified). checksum_overhead_SIZE is the median over the pairs
// of blocks of the ratio of their times, − 1 (pairedMedian);
// checksum_overhead_get_SIZE the same for the reads alone. And
// crc32c_throughput is CRC-32C over 1 MiB in this process, for scale.

const checksumSlots = 64

type sumRoot struct{ Vals [checksumSlots]pheap.Bytes }

// checksumSizes are the value sizes measured; the ratio named without a
// size is 4 KiB.
var checksumSizes = []struct {
	name string
	n    int
}{{"64B", 64}, {"4KiB", 4 << 10}, {"64KiB", 64 << 10}}

// checksumSteps returns a put-and-get step and a get-only step on h.
func checksumSteps(h *pheap.Heap, n int) (putGet, get func(i int) error, err error) {
	val := make([]byte, n)
	for i := range val {
		val[i] = byte(i*7 + 1)
	}
	root, err := pheap.Root[sumRoot](h, "sums")
	if err != nil {
		return nil, nil, err
	}
	put := func(i int) error {
		return h.Update(func(tx *pheap.Tx) error {
			r, err := root.Modify(tx)
			if err != nil {
				return err
			}
			v := &r.Vals[i%checksumSlots]
			if err := tx.Free(*v); err != nil {
				return err
			}
			val[0] = byte(i)
			*v, err = pheap.NewBytes(tx, val)
			return err
		})
	}
	get = func(i int) error {
		return h.View(func(tx *pheap.ViewTx) error {
			_, err := root.Get(tx).Vals[i%checksumSlots].Lookup(tx)
			return err
		})
	}
	// Every slot filled, so that a get never finds an empty one.
	for i := range checksumSlots {
		if err := put(i); err != nil {
			return nil, nil, err
		}
	}
	putGet = func(i int) error {
		if err := put(i); err != nil {
			return err
		}
		return get(i + checksumSlots/2)
	}
	return putGet, get, nil
}

// runChecksum adds runs of the paired checksum overheads to s.
func runChecksum(runs, n int, dir string, s *samples, progress io.Writer) error {
	for r := range runs {
		for _, sz := range checksumSizes {
			fmt.Fprintf(progress, "run %d/%d: %s values with and without checksums in alternating blocks of %d, %d puts and gets each\n",
				r+1, runs, sz.name, pairedBlock, n)
			put, get, err := checksumPaired(n, sz.n, dir)
			if err != nil {
				return fmt.Errorf("checksum workload on %s values in %s: %w", sz.name, dir, err)
			}
			s.Add("checksum_overhead_"+sz.name, "ratio", put)
			s.Add("checksum_overhead_get_"+sz.name, "ratio", get)
		}
		s.Add("crc32c_throughput", "GB/s", crcThroughput())
	}
	return nil
}

// checksumPaired runs the workload on values of size bytes, with and
// without checksums, and returns the put-and-get and the get overheads.
func checksumPaired(n, size int, dir string) (put, get float64, err error) {
	var puts, gets [2]func(int) error
	for k := range 2 {
		without := k == 1
		h, _, done, err := newPmemHeap(filepath.Join(dir, fmt.Sprintf("checksum-%d.heap", k)), heapSize(n), true)
		if err != nil {
			return 0, 0, err
		}
		defer done()
		pheapchecksums.NoChecksums.Store(without)
		p, g, err := checksumSteps(h, size)
		pheapchecksums.NoChecksums.Store(false)
		if err != nil {
			return 0, 0, err
		}
		// The switch is set only while the heap without checksums runs.
		puts[k] = func(i int) error {
			pheapchecksums.NoChecksums.Store(without)
			defer pheapchecksums.NoChecksums.Store(false)
			return p(i)
		}
		gets[k] = func(i int) error {
			pheapchecksums.NoChecksums.Store(without)
			defer pheapchecksums.NoChecksums.Store(false)
			return g(i)
		}
	}
	if put, err = pairedMedian(n, puts); err != nil {
		return 0, 0, fmt.Errorf("puts and gets: %w", err)
	}
	if get, err = pairedMedian(n, gets); err != nil {
		return 0, 0, fmt.Errorf("gets: %w", err)
	}
	return put, get, nil
}

// pairedMedian runs do[0] and do[1] n times each in alternating blocks of
// pairedBlock, the first of each pair of blocks in turn, and returns the
// median over the pairs of time(do[0]) / time(do[1]), − 1. A few
// microseconds of checksum in a transaction are less than what a
// preemption adds to a block on a busy machine: the median leaves such
// blocks out, where the ratio of the total times (paired) keeps them.
func pairedMedian(n int, do [2]func(int) error) (float64, error) {
	var ratios []float64
	for base, pair := 0, 0; base < n; base, pair = base+pairedBlock, pair+1 {
		var spent [2]time.Duration
		for j := range do {
			k := (j + pair) % 2
			t0 := time.Now()
			for i := base; i < min(base+pairedBlock, n); i++ {
				if err := do[k](i); err != nil {
					return 0, fmt.Errorf("step %d: %w", i, err)
				}
			}
			spent[k] = time.Since(t0)
		}
		ratios = append(ratios, spent[0].Seconds()/spent[1].Seconds())
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2] - 1, nil
}

// crcThroughput is CRC-32C over 1 MiB, 64 times, in GB/s.
func crcThroughput() float64 {
	b := make([]byte, 1<<20)
	table := crc32.MakeTable(crc32.Castagnoli)
	t0 := time.Now()
	var sum uint32
	for range 64 {
		sum = crc32.Update(sum, table, b)
	}
	return float64(64*len(b)) / time.Since(t0).Seconds() / 1e9
}
