package pheap

import (
	"crypto/rand"
	"fmt"
	"hash/crc32"
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
	if _, err := rand.Read(sb.UUID[:]); err != nil {
		return nil, fmt.Errorf("pheap: create %s: %w", name, err)
	}
	sb.Created = time.Now().UnixNano()
	// Everything but the arena payloads must start out zero: reserved fields,
	// free root slots, the log. The arena is zeroed block by block when
	// allocated.
	clear(b[:sb.ArenaOff])
	le.PutUint64(b[sb.AllocOff+amTop:], sb.ArenaOff)
	// Generation 1, so the zeroed log holds no entry of the open generation.
	le.PutUint64(b[sb.LogOff+logGen:], 1)
	mem.Flush(0, int(sb.ArenaOff))
	mem.Fence()
	copy(b, sb.encode())
	mem.Flush(0, SuperblockSize)
	mem.Fence()
	return newHeap(mem, sb, name), nil
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
	return &Heap{mem: mem, b: mem.Bytes()[:sb.Size], sb: sb, name: name, mode: mode}
}

// Mode reports how writes are made durable: "dax" (CPU cache flushes on a
// MAP_SYNC mapping), "msync" (page cache, msync at each durability point),
// or, for a heap over a Memory, that Memory's Mode method or "memory".
func (h *Heap) Mode() string { return h.mode }

// Size returns the size of the heap in bytes.
func (h *Heap) Size() int64 { return int64(h.sb.Size) }

// Close makes everything durable and releases the heap. Transactions still
// waiting to run get ErrClosed.
func (h *Heap) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	if h.closer != nil {
		return h.closer()
	}
	return nil
}

func (h *Heap) u64(off uint64) uint64 { return le.Uint64(h.b[off:]) }

// logEntry is a checked undo log entry.
type logEntry struct {
	pos       uint64 // where the entry starts in the log
	off, n    uint64 // the range it saves
	dataStart uint64
}

// scanLog returns the entries of the open transaction, in order. An entry
// that is torn or stale ends the scan; one that checks out but names a range
// outside the writable regions means corruption, not a crash. torn reports
// that the scan ended at an entry of the open generation that does not check
// out: the log holds bytes of an interrupted transaction even if no entry is
// whole.
func (h *Heap) scanLog() (gen uint64, ents []logEntry, torn bool, err error) {
	sb := &h.sb
	gen = h.u64(sb.LogOff + logGen)
	for i, c := range h.b[sb.LogOff+logReserved : sb.LogOff+logHeaderSize] {
		if c != 0 {
			return 0, nil, false, fmt.Errorf("%w: undo log header reserved byte %d is %#x", ErrCorrupt, logReserved+i, c)
		}
	}
	end := sb.LogOff + sb.LogSize
	for pos := sb.LogOff + logHeaderSize; pos+entHeaderSize <= end; {
		e := h.b[pos:]
		if le.Uint64(e[entGen:]) != gen {
			break
		}
		off, n := le.Uint64(e[entOff:]), uint64(le.Uint32(e[entLen:]))
		if n == 0 || n > end-pos-entHeaderSize {
			torn = true // cannot be a whole entry
			break
		}
		sum := crc32.Update(crc32.Checksum(e[:entChecksum], castagnoli), castagnoli, e[entHeaderSize:entHeaderSize+n])
		if sum != le.Uint32(e[entChecksum:]) {
			torn = true
			break
		}
		if off%lineSize != 0 || n%lineSize != 0 || off < sb.RootsOff || off > sb.Size || n > sb.Size-off {
			return 0, nil, false, fmt.Errorf("%w: undo log entry at %d saves [%d,+%d), outside the heap's writable part", ErrCorrupt, pos, off, n)
		}
		ents = append(ents, logEntry{pos: pos, off: off, n: n, dataStart: pos + entHeaderSize})
		pos += entHeaderSize + n
	}
	return gen, ents, torn, nil
}

// recover rolls back the transaction a crash interrupted. It first checks
// the metadata as the rollback would leave it, on a private copy, so a heap
// that fails the checks is left untouched. Rolling back only copies saved
// bytes over their ranges and then bumps the generation, so a crash during
// recovery is recovered from the same way. The generation is bumped even
// when only a torn entry is left, so no entry bytes of the interrupted
// transaction can pass for entries of the next one, which reuses the log.
func (h *Heap) recover() error {
	gen, ents, torn, err := h.scanLog()
	if err != nil {
		return err
	}
	sb := &h.sb
	meta := make([]byte, sb.ArenaOff-sb.RootsOff)
	copy(meta, h.b[sb.RootsOff:sb.ArenaOff])
	for i := len(ents) - 1; i >= 0; i-- {
		e := ents[i]
		for j := uint64(0); j < e.n; j++ {
			if p := e.off + j; p >= sb.RootsOff && p < sb.ArenaOff {
				meta[p-sb.RootsOff] = h.b[e.dataStart+j]
			}
		}
	}
	if err := h.checkMeta(meta); err != nil {
		return err
	}
	if len(ents) == 0 && !torn {
		return nil
	}
	h.undo(gen, ents)
	return nil
}

// checkMeta checks the root table and allocator metadata in meta, a copy of
// [RootsOff, ArenaOff).
func (h *Heap) checkMeta(meta []byte) error {
	sb := &h.sb
	am := meta[sb.AllocOff-sb.RootsOff:]
	top := le.Uint64(am[amTop:])
	if top < sb.ArenaOff || top > sb.Size || top%16 != 0 {
		return fmt.Errorf("%w: allocator top %d outside the arena [%d, %d]", ErrCorrupt, top, sb.ArenaOff, sb.Size)
	}
	if lb := le.Uint64(am[amLiveBytes:]); lb > top-sb.ArenaOff {
		return fmt.Errorf("%w: allocator counts %d live bytes in %d allocated", ErrCorrupt, lb, top-sb.ArenaOff)
	}
	if lo := le.Uint64(am[amLiveObjects:]); lo > (top-sb.ArenaOff)/32 {
		return fmt.Errorf("%w: allocator counts %d live objects in %d bytes", ErrCorrupt, lo, top-sb.ArenaOff)
	}
	for i := amReserved; i < amFreeHeads; i++ {
		if am[i] != 0 {
			return fmt.Errorf("%w: allocator reserved byte %d is %#x", ErrCorrupt, i, am[i])
		}
	}
	for i := amReserved2; i < allocMetaSize; i++ {
		if am[i] != 0 {
			return fmt.Errorf("%w: allocator reserved byte %d is %#x", ErrCorrupt, i, am[i])
		}
	}
	for c := range numClasses {
		head := le.Uint64(am[amFreeHeads+8*c:])
		if head == 0 {
			continue
		}
		if c >= len(classSizes) || head < sb.ArenaOff || head%16 != 0 || head >= top || classSizes[c] > top-head {
			return fmt.Errorf("%w: free list %d starts at %d, outside the allocated arena", ErrCorrupt, c, head)
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
