package pheap

import "bytes"

// The allocator's stage: an allocator operation (alloc, free) first
// collects here every header, link, bin head and counter it will change,
// reading through it so that a list operation sees the operation's own
// earlier changes; applyStage then saves every range that changes, fences
// once, and writes. No write comes before the save it needs.

// allocStage is one allocator operation's changes, kept until every range
// they touch is saved (see applyStage).
type allocStage struct {
	blocks []*stagedBlock
	heads  []headWrite
	meta   allocMeta
	pool   []stagedBlock // reused storage for blocks
	buf    []byte        // the encodings, for writes
	writes []stageWrite
}

// stagedBlock is a block header the operation reads or changes.
type stagedBlock struct {
	blockHdr
	wasFree bool // free as read: its links are saved with its header
	dead    bool // merged into a neighbour or given back to Top: zeroed
}

type headWrite struct {
	bin int
	off uint64
}

// stage returns the transaction's stage, emptied, with the counters read.
func (tx *Tx) stage() *allocStage {
	s := &tx.st
	s.blocks, s.heads, s.pool = s.blocks[:0], s.heads[:0], s.pool[:0]
	s.meta = tx.h.meta()
	return s
}

// add stages a header, reusing the pool's storage.
func (s *allocStage) add(b blockHdr, wasFree bool) *stagedBlock {
	if len(s.pool) == cap(s.pool) {
		// The old pool stays referenced by s.blocks; a new one is needed.
		s.pool = make([]stagedBlock, 0, max(8, 2*cap(s.pool)))
	}
	s.pool = append(s.pool, stagedBlock{blockHdr: b, wasFree: wasFree})
	sb := &s.pool[len(s.pool)-1]
	s.blocks = append(s.blocks, sb)
	return sb
}

// block returns the staged header at off, reading and checking it first
// if needed. kind is what a bad header is: ErrBadPtr for the block a
// caller names, ErrCorrupt for one reached through the heap's metadata.
func (tx *Tx) block(s *allocStage, off uint64, kind error) (*stagedBlock, error) {
	for _, b := range s.blocks {
		if b.off == off && !b.dead {
			return b, nil
		}
	}
	hd, err := tx.h.readHdr(off, s.meta.top, kind)
	if err != nil {
		return nil, err
	}
	return s.add(hd, hd.free()), nil
}

// head returns bin i's head as the stage has it.
func (tx *Tx) head(s *allocStage, i int) uint64 {
	for _, w := range s.heads {
		if w.bin == i {
			return w.off
		}
	}
	return tx.h.u64(tx.h.binHead(i))
}

func (s *allocStage) setHead(i int, off uint64) {
	for k := range s.heads {
		if s.heads[k].bin == i {
			s.heads[k].off = off
			return
		}
	}
	s.heads = append(s.heads, headWrite{i, off})
}

// applyStage saves every range the stage changes, and [extra, +n), fences
// once, and writes the stage.
func (tx *Tx) applyStage(s *allocStage, extra, n uint64) error {
	h := tx.h
	// Encode everything first: a range is saved and written only if its
	// bytes change.
	s.buf, s.writes = s.buf[:0], s.writes[:0]
	var zero [freeHeaderSize]byte
	for _, b := range s.blocks {
		n, save := uint64(blockHeaderSize), uint64(blockHeaderSize)
		if b.free() || (b.dead && b.wasFree) {
			n = freeHeaderSize
		}
		if b.wasFree || b.free() {
			// A free block's links are saved with its header, also when
			// they become payload: a rollback puts the block back on its
			// list.
			save = freeHeaderSize
		}
		at := s.grow(zero[:n])
		if !b.dead {
			b.encode(s.buf[at:])
		}
		s.emit(h, b.off, at, n, save)
	}
	at := s.grow(zero[:amReserved])
	s.meta.encode(s.buf[at:])
	s.emit(h, h.sb.AllocOff, at, amReserved, amReserved)
	for _, w := range s.heads {
		at := s.grow(zero[:8])
		le.PutUint64(s.buf[at:], w.off)
		s.emit(h, h.binHead(w.bin), at, 8, 8)
	}
	for _, w := range s.writes {
		if breakProtocol == "stage-unsaved" {
			break
		}
		if err := tx.save(w.off, w.save); err != nil {
			return err
		}
	}
	if n > 0 {
		if err := tx.save(extra, n); err != nil {
			return err
		}
	}
	tx.sync()
	for _, w := range s.writes {
		copy(h.b[w.off:w.off+w.n], s.buf[w.at:w.at+w.n])
	}
	if c := &h.bins; c.valid {
		for _, w := range s.heads {
			c.set(w.bin, w.off != 0)
		}
	}
	for _, b := range s.blocks {
		if b.dead || !b.free() {
			if len(tx.freeBlocks) > 0 {
				delete(tx.freeBlocks, b.off)
			}
			continue
		}
		if tx.freeBlocks == nil {
			tx.freeBlocks = map[uint64]uint64{}
		}
		tx.freeBlocks[b.off] = b.size
		// A free block's header lines that are fresh (in a block this
		// transaction allocated) go in the redo instead, so the next
		// transaction may take the block without saving them.
		for l := b.off / lineSize; l <= (b.off+freeHeaderSize-1)/lineSize; l++ {
			if k, ok := tx.lines[l]; ok && k == lineFresh {
				tx.lines[l] = lineNew
			} else if !ok && tx.touched(l) { // in a big fresh block
				tx.mark(l, lineNew)
			}
		}
	}
	return nil
}

// stageWrite is an encoding in allocStage.buf[at:at+n] for off, which
// saves save bytes from off first.
type stageWrite struct{ off, at, n, save uint64 }

// grow appends b to the stage's buffer and returns where.
func (s *allocStage) grow(b []byte) uint64 {
	at := uint64(len(s.buf))
	s.buf = append(s.buf, b...)
	return at
}

// emit records the encoding at buf[at:at+n] as a write to off if it
// changes the heap's bytes.
func (s *allocStage) emit(h *Heap, off, at, n, save uint64) {
	if !bytes.Equal(s.buf[at:at+n], h.b[off:off+n]) {
		s.writes = append(s.writes, stageWrite{off, at, n, save})
	}
}
