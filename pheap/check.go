package pheap

import "fmt"

// Stats describes the allocator's state.
type Stats struct {
	Size        int64 // heap size
	ArenaSize   int64 // bytes available for objects, headers included
	Used        int64 // arena bytes handed out at least once (up to Top)
	LiveBytes   int64 // bytes in allocated blocks, headers included
	LiveObjects int64 // allocated blocks
	FreeBytes   int64 // bytes in free blocks, reusable for their size class
	FreeObjects int64 // free blocks (counted by Check only)
}

// Stats returns the allocator counters, read without a full check.
func (v *ViewTx) Stats() Stats {
	h := v.heap()
	return Stats{
		Size:        int64(h.sb.Size),
		ArenaSize:   int64(h.sb.ArenaSize),
		Used:        int64(h.top() - h.sb.ArenaOff),
		LiveBytes:   int64(h.am(amLiveBytes)),
		LiveObjects: int64(h.am(amLiveObjects)),
		FreeBytes:   int64(h.top()-h.sb.ArenaOff) - int64(h.am(amLiveBytes)),
	}
}

// Check walks every block and every free list and verifies that they agree:
// each block up to Top is allocated or free, each free block is on exactly
// the list of its class and nothing else is, the live counters match, and
// every root refers to a live block. It returns the counted statistics.
func (v *ViewTx) Check() (Stats, error) {
	h := v.heap()
	st := Stats{Size: int64(h.sb.Size), ArenaSize: int64(h.sb.ArenaSize)}
	top := h.top()
	st.Used = int64(top - h.sb.ArenaOff)
	free := map[uint64]bool{} // free block -> seen on its list
	err := h.walkBlocks(func(blk, size uint64, state uint32) error {
		if state == blockFree {
			free[blk] = false
			st.FreeBytes += int64(size)
			st.FreeObjects++
		} else {
			st.LiveBytes += int64(size)
			st.LiveObjects++
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	for c := range numClasses {
		for blk, n := h.am(amFreeHeads+8*uint64(c)), 0; blk != 0; n++ {
			seen, ok := free[blk]
			switch {
			case !ok:
				return st, fmt.Errorf("pheap: check: %w: free list %d holds %d, not a free block", ErrCorrupt, c, blk)
			case seen:
				return st, fmt.Errorf("pheap: check: %w: free block %d is on a list twice (or a list loops)", ErrCorrupt, blk)
			case c >= len(classSizes) || h.u64(blk+bhSize) != classSizes[c]:
				return st, fmt.Errorf("pheap: check: %w: free block %d of %d bytes on list %d", ErrCorrupt, blk, h.u64(blk+bhSize), c)
			}
			free[blk] = true
			blk = h.u64(blk + bhNext)
		}
	}
	for blk, seen := range free {
		if !seen {
			return st, fmt.Errorf("pheap: check: %w: free block %d is on no list (leaked)", ErrCorrupt, blk)
		}
	}
	if lb, lo := int64(h.am(amLiveBytes)), int64(h.am(amLiveObjects)); lb != st.LiveBytes || lo != st.LiveObjects {
		return st, fmt.Errorf("pheap: check: %w: counters say %d live bytes in %d objects, blocks hold %d in %d",
			ErrCorrupt, lb, lo, st.LiveBytes, st.LiveObjects)
	}
	for i := range h.sb.RootsCount {
		e := h.sb.RootsOff + i*rootEntrySize
		if h.b[e] == 0 {
			continue
		}
		p := h.u64(e + rootPtr)
		if err := h.checkBlock(p-blockHeaderSize, blockAlloc); err != nil {
			return st, fmt.Errorf("pheap: check: root slot %d: %w", i, err)
		}
	}
	return st, nil
}

// walkBlocks calls fn for every block from the start of the arena to Top.
func (h *Heap) walkBlocks(fn func(blk, size uint64, state uint32) error) error {
	top := h.top()
	for blk := h.sb.ArenaOff; blk < top; {
		size := h.u64(blk + bhSize)
		if _, ok := classOf(size); !ok || size > top-blk {
			return fmt.Errorf("pheap: check: %w: block at %d has size %d", ErrCorrupt, blk, size)
		}
		state := le.Uint32(h.b[blk+bhState:])
		if state != blockAlloc && state != blockFree {
			return fmt.Errorf("pheap: check: %w: block at %d has state %#x", ErrCorrupt, blk, state)
		}
		if err := fn(blk, size, state); err != nil {
			return err
		}
		blk += size
	}
	return nil
}
