package pheap

import (
	"fmt"
)

// Stats describes the allocator's state.
type Stats struct {
	Size        int64 // heap size
	ArenaSize   int64 // bytes available for objects, headers included
	Used        int64 // arena bytes up to Top: in blocks, allocated or free
	LiveBytes   int64 // bytes in allocated blocks, headers included
	LiveObjects int64 // allocated blocks
	// FreeBytes is what can still be allocated, headers included: the free
	// blocks and the arena past Top (ArenaSize-LiveBytes).
	FreeBytes   int64
	FreeObjects int64 // free blocks (counted by Check only)
	// LargestAlloc is the largest object one allocation can take now: the
	// largest free block or the arena past Top, less a block header.
	LargestAlloc int64
}

// Stats returns the allocator counters, read without a full check, and the
// largest allocation, which costs a look at the list of free blocks of the
// largest size.
func (v *ViewTx) Stats() Stats {
	h := v.heap()
	m := h.meta()
	largest, free := h.largestFree()
	return Stats{
		Size:         int64(h.sb.Size),
		ArenaSize:    int64(h.sb.ArenaSize),
		Used:         int64(m.top - h.sb.ArenaOff),
		LiveBytes:    int64(m.liveBytes),
		LiveObjects:  int64(m.liveObjects),
		FreeBytes:    int64(free),
		LargestAlloc: int64(largest),
	}
}

// Check walks every block and every bin and verifies that they agree: the
// blocks tile the arena up to Top, each header checks out and names the
// size of the block before it, no two free blocks are neighbours and none
// ends at Top, each free block is on exactly the list of its bin, linked
// both ways, the counters match, every raw block's bytes match their
// checksum, and every root refers to a live block. It returns the counted
// statistics. Errors match ErrCorrupt (and ErrChecksum for a checksum).
func (v *ViewTx) Check() (Stats, error) {
	h := v.heap()
	st := Stats{Size: int64(h.sb.Size), ArenaSize: int64(h.sb.ArenaSize)}
	m := h.meta()
	st.Used = int64(m.top - h.sb.ArenaOff)
	free := map[uint64]blockHdr{}
	seen := map[uint64]bool{}
	var largest uint64
	last, lastFree := uint64(0), false
	err := h.walkHeaders(func(hd blockHdr) error {
		if hd.prevSize != last {
			return fmt.Errorf("pheap: check: %w: block at %d says the one before is %d bytes, it is %d", ErrCorrupt, hd.off, hd.prevSize, last)
		}
		if hd.free() {
			if lastFree {
				return fmt.Errorf("pheap: check: %w: free blocks at %d and %d are neighbours (not merged)", ErrCorrupt, hd.off-last, hd.off)
			}
			free[hd.off] = hd
			st.FreeBytes += int64(hd.size)
			st.FreeObjects++
			largest = max(largest, hd.size)
		} else {
			st.LiveBytes += int64(hd.size)
			st.LiveObjects++
			if hd.typ == 0 {
				data := h.b[hd.off+blockHeaderSize : hd.end()-uint64(hd.pad)]
				if sum := storedSum(data); sum != hd.dataSum {
					return fmt.Errorf("pheap: check: %w: the %d bytes at %d: %w: they sum to %#08x, their header says %#08x",
						ErrCorrupt, len(data), hd.off+blockHeaderSize, ErrChecksum, sum, hd.dataSum)
				}
			}
		}
		last, lastFree = hd.size, hd.free()
		return nil
	})
	if err != nil {
		return st, err
	}
	if lastFree {
		return st, fmt.Errorf("pheap: check: %w: the free block at %d ends at Top (not given back)", ErrCorrupt, m.top-last)
	}
	if m.lastSize != last {
		return st, fmt.Errorf("pheap: check: %w: the last block is %d bytes, the allocator says %d", ErrCorrupt, last, m.lastSize)
	}
	for i := range numBins {
		prev := uint64(0)
		for off := h.u64(h.binHead(i)); off != 0; {
			hd, ok := free[off]
			switch {
			case !ok:
				return st, fmt.Errorf("pheap: check: %w: bin %d holds %d, not a free block", ErrCorrupt, i, off)
			case seen[off]:
				return st, fmt.Errorf("pheap: check: %w: free block %d is on a list twice (or a list loops)", ErrCorrupt, off)
			case binFor(hd.size) != i:
				return st, fmt.Errorf("pheap: check: %w: free block %d of %d bytes in bin %d, its bin is %d", ErrCorrupt, off, hd.size, i, binFor(hd.size))
			case hd.prev != prev:
				return st, fmt.Errorf("pheap: check: %w: free block %d follows %d in bin %d but links back to %d", ErrCorrupt, off, prev, i, hd.prev)
			}
			seen[off] = true
			prev, off = off, hd.next
		}
	}
	for blk := range free {
		if !seen[blk] {
			return st, fmt.Errorf("pheap: check: %w: free block %d is on no list (leaked)", ErrCorrupt, blk)
		}
	}
	if lb, lo := int64(m.liveBytes), int64(m.liveObjects); lb != st.LiveBytes || lo != st.LiveObjects {
		return st, fmt.Errorf("pheap: check: %w: counters say %d live bytes in %d objects, blocks hold %d in %d",
			ErrCorrupt, lb, lo, st.LiveBytes, st.LiveObjects)
	}
	past := h.sb.Size - m.top
	st.FreeBytes += int64(past)
	if biggest := max(largest, past); biggest >= minBlock {
		st.LargestAlloc = int64(biggest - blockHeaderSize)
	}
	for i := range h.sb.RootsCount {
		e := h.sb.RootsOff + i*rootEntrySize
		if h.b[e] == 0 {
			continue
		}
		if err := checkRootEntry(h.b[e:e+rootEntrySize], h.sb.ArenaOff, m.top); err != nil {
			return st, fmt.Errorf("pheap: check: %w: root slot %d: %v", ErrCorrupt, i, err)
		}
		p := h.u64(e + rootPtr)
		if hd, err := h.readHdr(p-blockHeaderSize, m.top, ErrCorrupt); err != nil || hd.state != blockAlloc {
			return st, fmt.Errorf("pheap: check: %w: root slot %d: no live object at %d (%v)", ErrCorrupt, i, p, err)
		}
	}
	return st, nil
}

// walkHeaders calls fn with every block's checked header, from the start
// of the arena to Top.
func (h *Heap) walkHeaders(fn func(hd blockHdr) error) error {
	top := h.top()
	for blk := h.sb.ArenaOff; blk < top; {
		hd, err := h.readHdr(blk, top, ErrCorrupt)
		if err != nil {
			return fmt.Errorf("pheap: check: %w", err)
		}
		if err := fn(hd); err != nil {
			return err
		}
		blk = hd.end()
	}
	return nil
}

// walkBlocks calls fn for every block from the start of the arena to Top.
func (h *Heap) walkBlocks(fn func(blk, size uint64, state uint16) error) error {
	return h.walkHeaders(func(hd blockHdr) error { return fn(hd.off, hd.size, hd.state) })
}
