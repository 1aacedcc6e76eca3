package pheap

import (
	"fmt"

	"github.com/nvboot/nvboot/internal/pheapchecksums"
)

// The allocator hands out blocks of any multiple of 16 bytes and takes
// freed space back for any size: boundary tags (each header holds its
// own size and its predecessor's, so free finds both neighbours) and
// segregated free lists (bins; binFor) with splitting and immediate
// coalescing. An allocation takes a free block from the first bin whose
// blocks all fit (a bin of its exact size under 1 KiB; above, after a
// short first-fit look in its own bin) and splits off what it does not
// need as a new free block; failing that, it takes fresh space at Top. A
// free merges the block with a free neighbour on either side, and gives
// the space back to Top when it ends there, so no two free blocks are
// ever adjacent and no free block ends at Top: after everything is freed
// the arena is one piece again. The package documentation has the
// invariants and the alternatives rejected.
//
// Every change is made through the transaction: an allocator operation
// first collects the headers, links, bin heads and counters it will change
// (allocStage), saves them all, fences once, and only then writes. So a
// crash or abort restores the lists with the data that refers to them:
// nothing leaks, nothing is handed out twice.

// firstFitLook is how many blocks of its own bin an allocation of more
// than 1 KiB looks at before it splits a block of a larger bin; the rest
// of the bin is looked at only when no larger bin has a block.
const firstFitLook = 8

// freeBlock returns the free block at off reached through bin i's list.
func (tx *Tx) freeBlock(s *allocStage, off uint64, i int) (*stagedBlock, error) {
	b, err := tx.block(s, off, ErrCorrupt)
	if err != nil {
		return nil, fmt.Errorf("bin %d: %w", i, err)
	}
	if !b.free() || binFor(b.size) != i {
		return nil, fmt.Errorf("%w: bin %d holds the %s block of %d bytes at %d", ErrCorrupt, i, stateName(b.state), b.size, off)
	}
	return b, nil
}

// unlink takes free block b off its bin's list. b's size must still be the
// one it was filed under.
func (tx *Tx) unlink(s *allocStage, b *stagedBlock) error {
	i := binFor(b.size)
	if b.prev == 0 {
		if got := tx.head(s, i); got != b.off {
			return fmt.Errorf("%w: free block %d has no predecessor in bin %d, whose head is %d", ErrCorrupt, b.off, i, got)
		}
		s.setHead(i, b.next)
	} else {
		p, err := tx.freeBlock(s, b.prev, i)
		if err != nil {
			return err
		}
		if p.next != b.off {
			return fmt.Errorf("%w: bin %d: free block %d follows %d, which links to %d", ErrCorrupt, i, b.off, p.off, p.next)
		}
		p.next = b.next
	}
	if b.next != 0 {
		n, err := tx.freeBlock(s, b.next, i)
		if err != nil {
			return err
		}
		if n.prev != b.off {
			return fmt.Errorf("%w: bin %d: free block %d links to %d, which links back to %d", ErrCorrupt, i, b.off, n.off, n.prev)
		}
		n.prev = b.prev
	}
	b.next, b.prev = 0, 0
	return nil
}

// insert puts free block b at the head of its bin's list.
func (tx *Tx) insert(s *allocStage, b *stagedBlock) error {
	i := binFor(b.size)
	first := tx.head(s, i)
	if first != 0 {
		f, err := tx.freeBlock(s, first, i)
		if err != nil {
			return err
		}
		if f.prev != 0 {
			return fmt.Errorf("%w: bin %d starts with block %d, which links back to %d", ErrCorrupt, i, first, f.prev)
		}
		f.prev = b.off
	}
	b.next, b.prev = first, 0
	s.setHead(i, b.off)
	return nil
}

// findFree takes a free block of at least size bytes off its bin, or
// returns nil if there is none.
func (tx *Tx) findFree(s *allocStage, size uint64) (*stagedBlock, error) {
	h := tx.h
	b := binFor(size)
	take := func(off uint64, i int) (*stagedBlock, error) {
		blk, err := tx.freeBlock(s, off, i)
		if err != nil {
			return nil, err
		}
		return blk, tx.unlink(s, blk)
	}
	// look walks bin b from its head for a block that fits, looking at up
	// to limit blocks, and says whether it saw the whole bin.
	look := func(limit uint64) (uint64, bool, error) {
		for off, n := tx.head(s, b), uint64(0); off != 0; n++ {
			if n == limit {
				return 0, false, nil
			}
			hd, err := h.readHdr(off, s.meta.top, ErrCorrupt)
			if err != nil {
				return 0, false, fmt.Errorf("bin %d: %w", b, err)
			}
			if !hd.free() || binFor(hd.size) != b {
				return 0, false, fmt.Errorf("%w: bin %d holds the %s block of %d bytes at %d", ErrCorrupt, b, stateName(hd.state), hd.size, off)
			}
			if hd.size >= size {
				return off, true, nil
			}
			off = hd.next
		}
		return 0, true, nil
	}
	whole := true
	if b < exactBins {
		if off := tx.head(s, b); off != 0 {
			return take(off, b)
		}
	} else {
		off, all, err := look(firstFitLook)
		if err != nil || off != 0 {
			if err != nil {
				return nil, err
			}
			return take(off, b)
		}
		whole = all
	}
	// The cache reflects the heap, not the stage: the operation has staged
	// no head change before it looks for a block.
	if i := h.binBits().next(b + 1); i >= 0 {
		return take(tx.head(s, i), i)
	}
	if !whole {
		// A bin's list cannot be longer than the arena has blocks: more
		// means it loops.
		off, all, err := look(h.sb.ArenaSize/minBlock + 1)
		if err != nil {
			return nil, err
		}
		if !all {
			return nil, fmt.Errorf("%w: bin %d's list loops", ErrCorrupt, b)
		}
		if off != 0 {
			return take(off, b)
		}
	}
	return nil, nil
}

// blockSize is the size of the block holding n payload bytes.
func blockSize(n uint64) uint64 {
	return max(minBlock, (n+blockHeaderSize+15)&^15)
}

// alloc returns the payload offset of a new block of at least n payload
// bytes whose header carries the type tag. With data (len(data) == n,
// tag 0) the block is a raw block: it holds data and its checksum;
// otherwise its payload is zeroed. Everything it changes is saved first
// and made durable with a single fence.
func (tx *Tx) alloc(n uint64, tag uint32, data []byte) (uint64, error) {
	h := tx.heap()
	if tx.err != nil {
		return 0, tx.err
	}
	if n > h.sb.ArenaSize {
		return 0, tx.fail(fmt.Errorf("pheap: allocating %d bytes: %w (the arena has %d)", n, ErrNoSpace, h.sb.ArenaSize))
	}
	size := blockSize(n)
	s := tx.stage()
	blk, err := tx.findFree(s, size)
	if err != nil {
		return 0, tx.fail(fmt.Errorf("pheap: allocating %d bytes: %w", n, err))
	}
	// Lines that hold nothing anyone relies on (garbage) need no saving:
	// [glo, ghi) is where they may be. rlo, rhi: the new free block's
	// header, if the allocation splits one.
	var glo, ghi, rlo, rhi uint64
	if blk != nil {
		h.allocEvents.reused++
		whole := blk.size
		glo, ghi = blk.off+freeHeaderSize, blk.off+whole
		if whole-size >= minBlock {
			h.allocEvents.splits++
			r := s.add(blockHdr{off: blk.off + size, size: whole - size, prevSize: size, state: blockFree}, false)
			if err := tx.insert(s, r); err != nil {
				return 0, tx.fail(fmt.Errorf("pheap: allocating %d bytes: %w", n, err))
			}
			rlo, rhi = r.off, r.off+freeHeaderSize
			if err := tx.setPrevSize(s, blk.off+whole, whole, r.size); err != nil {
				return 0, tx.fail(fmt.Errorf("pheap: allocating %d bytes: %w", n, err))
			}
		} else {
			size = whole
		}
		blk.size = size
	} else {
		if size > h.sb.Size-s.meta.top {
			largest, free := h.largestFree()
			return 0, tx.fail(fmt.Errorf("pheap: allocating %d bytes: %w (%d bytes free in all, the largest allocation that fits is %d bytes)",
				n, ErrNoSpace, free, largest))
		}
		blk = s.add(blockHdr{off: s.meta.top, prevSize: s.meta.lastSize, size: size}, false)
		glo, ghi = blk.off, blk.off+size
		s.meta.top += size
		s.meta.lastSize = size
	}
	blk.state, blk.typ = blockAlloc, tag
	p := blk.off + blockHeaderSize
	if data != nil {
		blk.pad = uint8(size - blockHeaderSize - n)
		if !pheapchecksums.NoChecksums.Load() {
			blk.dataSum = storedSum(data)
		}
	}
	s.meta.liveBytes += size
	s.meta.liveObjects++
	if rhi > rlo {
		// The new free block's header lines go in the commit record's
		// redo, so the next transaction may change them unsaved.
		tx.markGarbage(max(glo, rlo&^(lineSize-1)), min(ghi, (rhi+lineSize-1)&^(lineSize-1)), lineNew)
	}
	tx.markGarbage(glo, min(ghi, blk.off+size), lineFresh)
	if err := tx.applyStage(s, p, size-blockHeaderSize); err != nil {
		return 0, err
	}
	if data != nil {
		copy(h.b[p:], data)
		clear(h.b[p+n : blk.off+size])
	} else {
		clear(h.b[p : blk.off+size])
	}
	return p, nil
}

// setPrevSize stages the change of the PrevSize of the block at off, whose
// predecessor was old bytes and is now size bytes; off may be Top.
func (tx *Tx) setPrevSize(s *allocStage, off, old, size uint64) error {
	if off == s.meta.top {
		if s.meta.lastSize != old {
			return fmt.Errorf("%w: the last block is %d bytes, the allocator says %d", ErrCorrupt, old, s.meta.lastSize)
		}
		s.meta.lastSize = size
		return nil
	}
	next, err := tx.block(s, off, ErrCorrupt)
	if err != nil {
		return fmt.Errorf("the block after a %d-byte block: %w", old, err)
	}
	if next.prevSize != old {
		return fmt.Errorf("%w: block %d follows a %d-byte block and says %d", ErrCorrupt, off, old, next.prevSize)
	}
	next.prevSize = size
	return nil
}

// free returns the block whose payload is at p, merging it with free
// neighbours and giving it back to Top when it ends there.
func (tx *Tx) free(p uint64) error {
	tx.heap()
	if tx.err != nil {
		return tx.err
	}
	if p < blockHeaderSize {
		return tx.fail(fmt.Errorf("pheap: free %d: %w", p, ErrBadPtr))
	}
	s := tx.stage()
	x, err := tx.block(s, p-blockHeaderSize, ErrBadPtr)
	if err != nil {
		return tx.fail(fmt.Errorf("pheap: free %d: %w", p, err))
	}
	if x.state != blockAlloc {
		return tx.fail(fmt.Errorf("pheap: free %d: %w: the block is free already", p, ErrBadPtr))
	}
	end := x.end()
	if err := tx.freeStaged(s, x); err != nil {
		return tx.fail(fmt.Errorf("pheap: free %d: %w", p, err))
	}
	// The payload held committed data unless this transaction allocated
	// it: an allocation later in the transaction must save those lines.
	tx.freedData = append(tx.freedData, [2]uint64{p, end})
	return tx.applyStage(s, 0, 0)
}

// freeStaged stages the free of allocated block x.
func (tx *Tx) freeStaged(s *allocStage, x *stagedBlock) error {
	h := tx.h
	size := x.size
	if s.meta.liveBytes < size || s.meta.liveObjects == 0 {
		return fmt.Errorf("%w: freeing %d bytes, the allocator counts %d live bytes in %d blocks", ErrCorrupt, size, s.meta.liveBytes, s.meta.liveObjects)
	}
	s.meta.liveBytes -= size
	s.meta.liveObjects--
	start, end, prevSize := x.off, x.end(), x.prevSize
	m := x // the block the merged free block starts with
	if x.prevSize != 0 {
		pb, err := tx.block(s, x.off-x.prevSize, ErrCorrupt)
		if err != nil {
			return fmt.Errorf("the block before: %w", err)
		}
		if pb.size != x.prevSize {
			return fmt.Errorf("%w: block %d says the one before is %d bytes, it is %d", ErrCorrupt, x.off, x.prevSize, pb.size)
		}
		if pb.free() {
			h.allocEvents.mergedPrev++
			if err := tx.unlink(s, pb); err != nil {
				return err
			}
			x.dead = true
			m, start, prevSize = pb, pb.off, pb.prevSize
		}
	}
	after := size // the size of the block before the one after the merge
	if end != s.meta.top {
		nb, err := tx.block(s, end, ErrCorrupt)
		if err != nil {
			return fmt.Errorf("the block after: %w", err)
		}
		if nb.prevSize != size {
			return fmt.Errorf("%w: block %d follows a %d-byte block and says %d", ErrCorrupt, end, size, nb.prevSize)
		}
		if nb.free() {
			h.allocEvents.mergedNext++
			if err := tx.unlink(s, nb); err != nil {
				return err
			}
			nb.dead = true
			end, after = nb.end(), nb.size
		}
	} else if s.meta.lastSize != size {
		return fmt.Errorf("%w: the last block is %d bytes, the allocator says %d", ErrCorrupt, size, s.meta.lastSize)
	}
	if end == s.meta.top {
		h.allocEvents.toTop++
		m.dead = true
		s.meta.top, s.meta.lastSize = start, prevSize
		return nil
	}
	m.blockHdr = blockHdr{off: start, size: end - start, prevSize: prevSize, state: blockFree}
	if err := tx.insert(s, m); err != nil {
		return err
	}
	return tx.setPrevSize(s, end, after, end-start)
}

// markGarbage marks the untouched lines wholly inside [lo, hi) that hold
// no data this transaction freed: kind lineFresh (see markFresh) or
// lineNew. The caller knows that nothing relies on their bytes unless the
// transaction commits.
func (tx *Tx) markGarbage(lo, hi uint64, kind uint8) {
	freed := tx.freedData
	if breakProtocol == "freed-data" {
		freed = nil
	}
	for lo < hi {
		// [lo, cut) overlaps no freed range; next is where to go on.
		cut, next := hi, hi
		for _, r := range freed {
			if r[1] <= lo || r[0] >= hi {
				continue
			}
			if r[0] <= lo {
				cut, next = lo, r[1]
				break
			}
			if r[0] < cut {
				cut, next = r[0], r[1]
			}
		}
		if cut > lo {
			if kind == lineFresh {
				tx.markFresh(lo, cut-lo)
			} else {
				tx.markNew(lo, cut-lo)
			}
		}
		lo = next
	}
}

// markNew marks the untouched lines wholly inside [off, off+n) lineNew, or
// lineCovered if the last commit record holds them.
func (tx *Tx) markNew(off, n uint64) {
	for l := (off + lineSize - 1) / lineSize; l < (off+n)/lineSize; l++ {
		switch {
		case tx.touched(l):
		case tx.h.covers(l):
			tx.mark(l, lineCovered)
		default:
			tx.mark(l, lineNew)
		}
	}
}

// largestFree returns the largest payload one allocation can take now and
// the bytes free in all (headers included). It reads the bins' heads and
// the list of the highest bin that has a block, no more.
func (h *Heap) largestFree() (largest, free uint64) {
	m := h.meta()
	if m.liveBytes <= h.sb.ArenaSize {
		free = h.sb.ArenaSize - m.liveBytes
	}
	biggest := h.sb.Size - min(m.top, h.sb.Size)
	// Not through the bin cache: Views call this concurrently, and must
	// not rebuild it.
	i := numBins - 1
	for i >= 0 && h.u64(h.binHead(i)) == 0 {
		i--
	}
	if i >= 0 {
		off := h.u64(h.binHead(i))
		for n := uint64(0); off != 0 && n <= h.sb.ArenaSize/minBlock; n++ {
			hd, err := h.readHdr(off, m.top, ErrCorrupt)
			if err != nil || !hd.free() {
				break
			}
			biggest = max(biggest, hd.size)
			off = hd.next
		}
	}
	if biggest < minBlock {
		return 0, free
	}
	return biggest - blockHeaderSize, free
}

// object checks that p is the payload of a live block of the given tag
// holding at least n bytes and returns those bytes and the header.
func (h *Heap) object(p, n uint64, tag uint32) ([]byte, blockHdr, error) {
	if p < blockHeaderSize || p%16 != 0 {
		return nil, blockHdr{}, fmt.Errorf("%w: offset %d is not an object", ErrBadPtr, p)
	}
	hd, err := h.readHdr(p-blockHeaderSize, h.top(), ErrBadPtr)
	if err != nil {
		return nil, hd, err
	}
	if hd.state != blockAlloc {
		return nil, hd, fmt.Errorf("%w: object at %d was freed", ErrBadPtr, p)
	}
	if hd.typ != tag {
		return nil, hd, fmt.Errorf("%w: object at %d has type tag %#x, want %#x", ErrBadPtr, p, hd.typ, tag)
	}
	if n > hd.size-blockHeaderSize {
		return nil, hd, fmt.Errorf("%w: object at %d holds %d bytes, want %d", ErrBadPtr, p, hd.size-blockHeaderSize, n)
	}
	if err := h.settle(p, n); err != nil {
		return nil, hd, err
	}
	return h.b[p : p+n : p+n], hd, nil
}
