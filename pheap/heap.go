package pheap

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Memory is the persistence layer under a Heap: a byte range that survives
// power loss once its cache lines are flushed and a fence follows. The
// production layer is a file mapping (CLWB/SFENCE or msync); tests use
// crashsim to enumerate what a power cut could leave.
type Memory interface {
	// Bytes returns the whole memory; the heap reads and writes it directly.
	Bytes() []byte
	// Flush starts writing back the cache lines overlapping [off, off+n).
	Flush(off, n int)
	// Fence waits for earlier flushes: after it they are durable.
	Fence()
}

// Heap is an open persistent heap. See the package documentation for the
// concurrency model.
type Heap struct {
	mu     sync.RWMutex
	mem    Memory
	b      []byte
	sb     superblock
	name   string // path, for messages
	mode   string
	closed bool
	closer func() error
	txs    txState // the write transaction's state, reused
	// gen is the generation of the next write transaction (see log.go).
	gen uint64
	// cover: the redo runs of the newest committed record, the lines the
	// next transaction may change in place without saving them.
	cover []redoRun
	// unfenced: the lines of the last commit's deferred stores, flushed
	// without a fence. The next commit puts them in its redo, as its
	// record may become durable before they do.
	unfenced []uint64
	// nonce gives each transaction attempt its nonce; random, so attempts
	// before and after a crash differ. Tests that need identical images
	// replace it.
	nonce func() uint64
	// bins caches which bins have a block, so that an allocation finds the
	// next one without reading every head (heads, 1.7 KiB, are the truth:
	// applyStage keeps the cache in step, rollback drops it).
	bins binCache
	// allocEvents counts what the allocator did, for tests that must show
	// a workload splits and merges blocks.
	allocEvents struct{ reused, splits, mergedPrev, mergedNext, toTop int }
}

// CreateMemory formats mem as an empty heap and opens it. The superblock is
// written last, so a crash during formatting leaves memory Open refuses.
func CreateMemory(mem Memory) (*Heap, error) {
	return createMemory(mem, "memory")
}

func createMemory(mem Memory, name string) (*Heap, error) {
	b := mem.Bytes()
	size := uint64(len(b)) &^ (pageSize - 1)
	if size < MinSize {
		return nil, fmt.Errorf("pheap: create %s: %w: %d bytes, need at least %d", name, ErrTooSmall, len(b), MinSize)
	}
	sb := layoutFor(size)
	if _, err := crand.Read(sb.UUID[:]); err != nil {
		return nil, fmt.Errorf("pheap: create %s: %w", name, err)
	}
	sb.Created = time.Now().UnixNano()
	// Everything but the arena payloads must start out zero: reserved fields,
	// free root slots, the log. The arena is zeroed block by block when
	// allocated.
	clear(b[:sb.ArenaOff])
	allocMeta{top: sb.ArenaOff}.encode(b[sb.AllocOff:])
	mem.Flush(0, int(sb.ArenaOff))
	mem.Fence()
	copy(b, sb.encode())
	mem.Flush(0, SuperblockSize)
	mem.Fence()
	h := newHeap(mem, sb, name)
	h.gen = 1 // the log is all zero: no generation wrote to it
	return h, nil
}

// OpenMemory opens the heap in mem, rolling back a transaction a crash
// interrupted. It changes nothing unless the heap checks out.
func OpenMemory(mem Memory) (*Heap, error) {
	h, err := openMemory(mem, "memory")
	if err != nil {
		return nil, fmt.Errorf("pheap: open memory: %w", err)
	}
	return h, nil
}

func openMemory(mem Memory, name string) (*Heap, error) {
	b := mem.Bytes()
	sb, err := decodeSuperblock(b)
	if err != nil {
		return nil, err
	}
	if sb.Size > uint64(len(b)) {
		return nil, fmt.Errorf("%w: superblock says %d bytes, there are %d", ErrTruncated, sb.Size, len(b))
	}
	h := newHeap(mem, sb, name)
	if err := h.recover(); err != nil {
		return nil, err
	}
	return h, nil
}

func newHeap(mem Memory, sb superblock, name string) *Heap {
	mode := "memory"
	if m, ok := mem.(interface{ Mode() string }); ok {
		mode = m.Mode()
	}
	return &Heap{mem: mem, b: mem.Bytes()[:sb.Size], sb: sb, name: name, mode: mode, nonce: rand.Uint64}
}

// Mode reports how writes are made durable: "dax" (CPU cache flushes on a
// MAP_SYNC mapping), "msync" (page cache, msync at each durability point),
// or, for a heap over a Memory, that Memory's Mode method or "memory".
func (h *Heap) Mode() string { return h.mode }

// Size returns the size of the heap in bytes.
func (h *Heap) Size() int64 { return int64(h.sb.Size) }

// Close makes everything durable and releases the heap. Transactions still
// waiting to run get ErrClosed. After an Update it also commits an empty
// generation to the log, so the next Open has nothing to recover and
// touches no byte of the arena (log.go).
func (h *Heap) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	// The last commit's deferred stores were flushed without a fence.
	h.mem.Fence()
	h.retire()
	if h.closer != nil {
		return h.closer()
	}
	return nil
}

func (h *Heap) u64(off uint64) uint64 { return le.Uint64(h.b[off:]) }

// checkMeta checks the root table and allocator metadata in meta, a copy of
// [RootsOff, ArenaOff).
func (h *Heap) checkMeta(meta []byte) error {
	sb := &h.sb
	am := meta[sb.AllocOff-sb.RootsOff:]
	if got, want := le.Uint32(am[amChecksum:]), storedSum(am[:amChecksum]); got != want {
		return fmt.Errorf("%w: allocator counters: %w: stored %#08x, the counters give %#08x", ErrCorrupt, ErrChecksum, got, want)
	}
	m := decodeMeta(am)
	top, arena := m.top, m.top-sb.ArenaOff
	switch {
	case top < sb.ArenaOff || top > sb.Size || top%16 != 0:
		return fmt.Errorf("%w: allocator top %d outside the arena [%d, %d]", ErrCorrupt, top, sb.ArenaOff, sb.Size)
	case m.lastSize%16 != 0 || m.lastSize > arena || (m.lastSize == 0) != (arena == 0) || (m.lastSize != 0 && m.lastSize < minBlock):
		return fmt.Errorf("%w: allocator says the last block is %d bytes, of %d up to Top", ErrCorrupt, m.lastSize, arena)
	case m.liveBytes > arena:
		return fmt.Errorf("%w: allocator counts %d live bytes in %d allocated", ErrCorrupt, m.liveBytes, arena)
	case m.liveObjects > arena/minBlock:
		return fmt.Errorf("%w: allocator counts %d live objects in %d bytes", ErrCorrupt, m.liveObjects, arena)
	}
	for i := amReserved; i < amBinHeads; i++ {
		if am[i] != 0 {
			return fmt.Errorf("%w: allocator reserved byte %d is %#x", ErrCorrupt, i, am[i])
		}
	}
	for i := amReserved2; i < allocMetaSize; i++ {
		if am[i] != 0 {
			return fmt.Errorf("%w: allocator reserved byte %d is %#x", ErrCorrupt, i, am[i])
		}
	}
	for i := range numBins {
		head := le.Uint64(am[amBinHeads+8*i:])
		if head != 0 && (head < sb.ArenaOff || head%16 != 0 || head >= top || top-head < minBlock) {
			return fmt.Errorf("%w: bin %d starts at %d, outside the allocated arena", ErrCorrupt, i, head)
		}
	}
	for i := range sb.RootsCount {
		e := meta[i*rootEntrySize : (i+1)*rootEntrySize]
		if err := checkRootEntry(e, sb.ArenaOff, top); err != nil {
			return fmt.Errorf("%w: root slot %d: %v", ErrCorrupt, i, err)
		}
	}
	return nil
}
