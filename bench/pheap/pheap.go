package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/pheap"
	"github.com/nvboot/nvboot/pmem"
)

// pmemFile is a shared mapping of a file used as persistent memory: Flush
// and Fence are the CPU instructions pheap uses on a DAX mapping (what
// PMEM_IS_PMEM_FORCE=1 makes libpmemobj do on tmpfs), or nothing at all
// when flush is off, to measure what durability costs. On a DAX filesystem
// the mapping is MAP_SYNC, as pheap.Create's; on tmpfs a plain shared one.
type pmemFile struct {
	b     []byte
	flush bool
	sync  bool // mapped MAP_SYNC: the file is on a DAX filesystem
	// fences and lines count the durability work, flushes on or off: the
	// protocol's cost in a unit no other load on the machine can blur.
	fences, lines int
}

func (m *pmemFile) Bytes() []byte { return m.b }

func (m *pmemFile) Flush(off, n int) {
	if n > 0 {
		m.lines += (off+n-1)/64 - off/64 + 1
	}
	if m.flush {
		pmem.Flush(m.b[off : off+n])
	}
}

func (m *pmemFile) Fence() {
	m.fences++
	if m.flush {
		pmem.Fence()
	}
}

func (m *pmemFile) Mode() string {
	switch {
	case !m.flush && m.sync:
		return "no-flush (MAP_SYNC mapping)"
	case !m.flush:
		return "no-flush"
	case m.sync:
		return "dax/" + pmem.Method()
	}
	return "forced-pmem/" + pmem.Method()
}

// newPmemHeap creates a heap of size bytes over a fresh file at path,
// allocated up front as pheap.Create does.
func newPmemHeap(path string, size int, flush bool) (*pheap.Heap, *pmemFile, func(), error) {
	os.Remove(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(size)); err != nil {
		if err := f.Truncate(int64(size)); err != nil {
			return nil, nil, nil, fmt.Errorf("sizing %s: %w", path, err)
		}
	}
	prot, sync := unix.PROT_READ|unix.PROT_WRITE, true
	b, err := unix.Mmap(int(f.Fd()), 0, size, prot, unix.MAP_SHARED_VALIDATE|unix.MAP_SYNC)
	if err != nil { // not a DAX filesystem
		sync = false
		b, err = unix.Mmap(int(f.Fd()), 0, size, prot, unix.MAP_SHARED)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("mapping %s: %w", path, err)
	}
	pf := &pmemFile{b: b, flush: flush, sync: sync}
	h, err := pheap.CreateMemory(pf)
	if err != nil {
		unix.Munmap(b)
		return nil, nil, nil, fmt.Errorf("creating a heap in %s: %w", path, err)
	}
	return h, pf, func() { h.Close(); unix.Munmap(b); os.Remove(path) }, nil
}

// timing is what one run of a transaction workload gives.
type timing struct {
	total time.Duration // all n transactions
	p50   time.Duration // median transaction latency
	// pheap over pmemFile only: fences and cache lines flushed per
	// transaction (the setup transaction included, spread over n)
	fences, lines float64
	mode          string // how the system made its writes durable
}

// timeTxs runs n transactions through do and times each.
func timeTxs(n int, do func(i int) error) (timing, error) {
	lat := make([]time.Duration, n)
	start := time.Now()
	for i := range n {
		t0 := time.Now()
		if err := do(i); err != nil {
			return timing{}, fmt.Errorf("transaction %d: %w", i, err)
		}
		lat[i] = time.Since(t0)
	}
	total := time.Since(start)
	slices.Sort(lat)
	return timing{total: total, p50: lat[n/2]}, nil
}

type value64 [64]byte

func val64(i int) (v value64) {
	for j := range v {
		v[j] = byte(i)
	}
	return v
}

// mapKey spreads the keys as the C side does.
func mapKey(i int) uint64 { return uint64(i) * 0x9E3779B97F4A7C15 }

type update64Root struct{ Value value64 }

// pheapUpdate64 rewrites one 64-byte value in n transactions.
func pheapUpdate64(h *pheap.Heap, n int) (timing, error) {
	do, err := update64Step(h)
	if err != nil {
		return timing{}, err
	}
	return timeTxs(n, do)
}

// update64Step readies h for the update64 workload and returns its i-th
// transaction.
func update64Step(h *pheap.Heap) (func(i int) error, error) {
	root, err := pheap.Root[update64Root](h, "bench")
	if err != nil {
		return nil, err
	}
	return func(i int) error {
		return h.Update(func(tx *pheap.Tx) error {
			return root.Set(tx, update64Root{val64(i)})
		})
	}, nil
}

type mapRoot struct{ M pheap.Map[uint64, value64] }

// pheapMapInsert inserts n keys into a persistent map, one transaction each.
func pheapMapInsert(h *pheap.Heap, n int) (timing, error) {
	do, err := mapInsertStep(h)
	if err != nil {
		return timing{}, err
	}
	return timeTxs(n, do)
}

// mapInsertStep readies h for the mapinsert workload and returns its i-th
// transaction.
func mapInsertStep(h *pheap.Heap) (func(i int) error, error) {
	root, err := pheap.Root[mapRoot](h, "bench")
	if err != nil {
		return nil, err
	}
	err = h.Update(func(tx *pheap.Tx) error {
		m, err := pheap.NewMap[uint64, value64](tx)
		if err != nil {
			return err
		}
		return root.Set(tx, mapRoot{m})
	})
	if err != nil {
		return nil, err
	}
	var m pheap.Map[uint64, value64]
	h.View(func(tx *pheap.ViewTx) error { m = root.Get(tx).M; return nil })
	return func(i int) error {
		return h.Update(func(tx *pheap.Tx) error {
			return m.Put(tx, mapKey(i), val64(i))
		})
	}, nil
}

// pairedBlock is how many transactions pairedOverhead runs on one heap
// before it switches to the other.
const pairedBlock = 200

// pairedOverhead runs a workload on a durable and a no-flush heap in
// alternating blocks of pairedBlock transactions, n on each, and returns
// no-flush throughput / durable throughput − 1. Other load on the machine
// (other agents, other benchmarks) drifts over seconds and slows both alike,
// where the round-robin runs, each a fraction of a second on one system,
// catch it unevenly.
func pairedOverhead(dir string, n int, step func(*pheap.Heap) (func(int) error, error)) (float64, error) {
	var do [2]func(int) error
	for k, flush := range []bool{true, false} {
		h, _, done, err := newPmemHeap(filepath.Join(dir, fmt.Sprintf("paired-%d.heap", k)), heapSize(n), flush)
		if err != nil {
			return 0, err
		}
		defer done()
		if do[k], err = step(h); err != nil {
			return 0, err
		}
	}
	return paired(n, do)
}

// paired runs do[0] and do[1] n times each in alternating blocks of
// pairedBlock and returns time(do[0]) / time(do[1]) − 1.
func paired(n int, do [2]func(int) error) (float64, error) {
	var spent [2]time.Duration
	for base := 0; base < n; base += pairedBlock {
		for k := range do {
			t0 := time.Now()
			for i := base; i < min(base+pairedBlock, n); i++ {
				if err := do[k](i); err != nil {
					return 0, fmt.Errorf("step %d: %w", i, err)
				}
			}
			spent[k] += time.Since(t0)
		}
	}
	return spent[0].Seconds()/spent[1].Seconds() - 1, nil
}
