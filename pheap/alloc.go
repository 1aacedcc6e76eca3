package pheap

import "fmt"

// The allocator is segregated-fit: every block size is a size class, each
// class has a free list threaded through its free blocks, and a bump pointer
// (Top) hands out arena space never used before. Blocks are not split or
// merged, so a freed block is reused only for its own class. All its
// metadata (Top, counters, list heads, block headers, links) is changed
// through the transaction's undo log, so a crash or abort restores the lists
// together with the data that refers to them: nothing leaks, nothing is
// handed out twice.

// classSizes are the block sizes, header included: steps of 16 up to 128,
// then four steps per doubling up to 2 KiB, then powers of two.
var classSizes = func() []uint64 {
	var s []uint64
	for sz := uint64(32); sz <= 128; sz += 16 {
		s = append(s, sz)
	}
	for base := uint64(128); base < 2048; base *= 2 {
		for i := uint64(1); i <= 4; i++ {
			s = append(s, base+base/4*i)
		}
	}
	for sz := uint64(4096); sz <= 1<<50; sz *= 2 {
		s = append(s, sz)
	}
	if len(s) > numClasses {
		panic("pheap: too many size classes")
	}
	return s
}()

// classFor returns the class of the smallest block holding need bytes.
func classFor(need uint64) (int, bool) {
	for i, sz := range classSizes {
		if sz >= need {
			return i, true
		}
	}
	return 0, false
}

// classOf returns the class whose block size is exactly size.
func classOf(size uint64) (int, bool) {
	for i, sz := range classSizes {
		if sz == size {
			return i, true
		}
	}
	return 0, false
}

func (h *Heap) am(field uint64) uint64 { return h.u64(h.sb.AllocOff + field) }

func (h *Heap) top() uint64 { return h.am(amTop) }

// alloc returns the payload offset of a new zeroed block of at least n
// payload bytes whose header carries the type tag. Everything it changes is
// saved first and made durable with a single fence.
func (tx *Tx) alloc(n uint64, tag uint32) (uint64, error) {
	h := tx.heap()
	if tx.err != nil {
		return 0, tx.err
	}
	c, ok := classFor(n + blockHeaderSize)
	if !ok || n > h.sb.ArenaSize {
		return 0, tx.fail(fmt.Errorf("pheap: allocating %d bytes: %w", n, ErrNoSpace))
	}
	size := classSizes[c]
	headOff := h.sb.AllocOff + amFreeHeads + 8*uint64(c)
	blk := h.u64(headOff)
	var link, linkVal uint64 // the list head or Top, and its new value
	if blk != 0 {
		// Reuse a free block. Save its header and link before they change,
		// since rolling back must put it back on the list intact.
		if err := h.checkBlock(blk, blockFree); err != nil {
			return 0, tx.fail(err)
		}
		if got := h.u64(blk + bhSize); got != size {
			return 0, tx.fail(fmt.Errorf("pheap: %w: block %d on free list of %d-byte blocks has size %d", ErrCorrupt, blk, size, got))
		}
		next := h.u64(blk + bhNext)
		if next != 0 && (next < h.sb.ArenaOff || next%16 != 0 || next >= h.top()) {
			return 0, tx.fail(fmt.Errorf("pheap: %w: free block %d links to %d", ErrCorrupt, blk, next))
		}
		link, linkVal = headOff, next
	} else {
		top := h.top()
		if size > h.sb.Size-top {
			return 0, tx.fail(fmt.Errorf("pheap: allocating %d bytes: %w (%d of %d arena bytes left unused, free lists of other sizes not reusable)",
				n, ErrNoSpace, h.sb.Size-top, h.sb.ArenaSize))
		}
		blk = top
		// Past Top nothing is in use, so nothing there needs saving.
		tx.markFresh(blk, size)
		link, linkVal = h.sb.AllocOff+amTop, top+size
	}
	// The header and, in a free block, the link that starts the payload,
	// are saved before the payload lines are marked fresh.
	for _, r := range [][2]uint64{{link, 8}, {h.sb.AllocOff + amLiveBytes, 16}, {blk, blockHeaderSize + 8}} {
		if err := tx.save(r[0], r[1]); err != nil {
			return 0, err
		}
	}
	p := blk + blockHeaderSize
	if !tx.freed[blk] {
		// A block freed earlier in this transaction still holds the data a
		// rollback brings back, so only other blocks skip the log.
		tx.markFresh(p, size-blockHeaderSize)
	}
	if err := tx.saveAll(p, size-blockHeaderSize); err != nil {
		return 0, err
	}
	le.PutUint64(h.b[link:], linkVal)
	le.PutUint64(h.b[blk+bhSize:], size)
	le.PutUint32(h.b[blk+bhState:], blockAlloc)
	le.PutUint32(h.b[blk+bhType:], tag)
	tx.count(int64(size), 1)
	clear(h.b[p : blk+size])
	return p, nil
}

// saveAll saves (offset, length) pairs and fences once.
func (tx *Tx) saveAll(ranges ...uint64) error {
	for i := 0; i+1 < len(ranges); i += 2 {
		if err := tx.save(ranges[i], ranges[i+1]); err != nil {
			return err
		}
	}
	tx.sync()
	return nil
}

// count adjusts the live counters; the caller saved them.
func (tx *Tx) count(bytes, objects int64) {
	h := tx.h
	le.PutUint64(h.b[h.sb.AllocOff+amLiveBytes:], uint64(int64(h.am(amLiveBytes))+bytes))
	le.PutUint64(h.b[h.sb.AllocOff+amLiveObjects:], uint64(int64(h.am(amLiveObjects))+objects))
}

// free returns the block whose payload is at p to its free list.
func (tx *Tx) free(p uint64) error {
	h := tx.heap()
	if tx.err != nil {
		return tx.err
	}
	if p < blockHeaderSize {
		return tx.fail(fmt.Errorf("pheap: free %d: %w", p, ErrBadPtr))
	}
	blk := p - blockHeaderSize
	if err := h.checkBlock(blk, blockAlloc); err != nil {
		return tx.fail(fmt.Errorf("pheap: free %d: %w", p, err))
	}
	size := h.u64(blk + bhSize)
	c, _ := classOf(size)
	headOff := h.sb.AllocOff + amFreeHeads + 8*uint64(c)
	if err := tx.saveAll(blk, blockHeaderSize+8, headOff, 8, h.sb.AllocOff+amLiveBytes, 16); err != nil {
		return err
	}
	le.PutUint32(h.b[blk+bhState:], blockFree)
	le.PutUint32(h.b[blk+bhType:], 0)
	le.PutUint64(h.b[blk+bhNext:], h.u64(headOff))
	le.PutUint64(h.b[headOff:], blk)
	if tx.freed == nil {
		tx.freed = map[uint64]bool{}
	}
	tx.freed[blk] = true
	tx.count(-int64(size), -1)
	return nil
}

// checkBlock checks that a block header at blk is in the allocated arena,
// has a class size and is in the given state.
func (h *Heap) checkBlock(blk uint64, state uint32) error {
	top := h.top()
	if blk < h.sb.ArenaOff || blk%16 != 0 || blk >= top || top-blk < 32 {
		return fmt.Errorf("%w: no block at %d", ErrBadPtr, blk)
	}
	size := h.u64(blk + bhSize)
	if _, ok := classOf(size); !ok || size > top-blk {
		return fmt.Errorf("%w: block at %d has size %d", ErrBadPtr, blk, size)
	}
	if got := le.Uint32(h.b[blk+bhState:]); got != state {
		what := map[uint32]string{blockAlloc: "allocated", blockFree: "free"}
		g, ok := what[got]
		if !ok {
			g = fmt.Sprintf("state %#x", got)
		}
		return fmt.Errorf("%w: block at %d is %s, want %s", ErrBadPtr, blk, g, what[state])
	}
	return nil
}

// object checks that p is the payload of a live block of the given tag
// holding at least n bytes and returns those bytes.
func (h *Heap) object(p, n uint64, tag uint32) ([]byte, error) {
	if p < blockHeaderSize || p%16 != 0 {
		return nil, fmt.Errorf("%w: offset %d is not an object", ErrBadPtr, p)
	}
	blk := p - blockHeaderSize
	if err := h.checkBlock(blk, blockAlloc); err != nil {
		return nil, err
	}
	if got := le.Uint32(h.b[blk+bhType:]); got != tag {
		return nil, fmt.Errorf("%w: object at %d has type tag %#x, want %#x", ErrBadPtr, p, got, tag)
	}
	if size := h.u64(blk + bhSize); n > size-blockHeaderSize {
		return nil, fmt.Errorf("%w: object at %d holds %d bytes, want %d", ErrBadPtr, p, size-blockHeaderSize, n)
	}
	if err := h.settle(p, n); err != nil {
		return nil, err
	}
	return h.b[p : p+n : p+n], nil
}
