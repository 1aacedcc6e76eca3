package pheap

import (
	"fmt"
	"hash/crc32"
)

// The undo log protocol (formats in layout.go).
//
// A transaction of generation g writes its entries in half g%2 of the log,
// each made durable (flush, fence) before the ranges it saves are modified.
// To commit, it writes a commit record after its entries: the list of
// lines it wrote in blocks it allocated (not logged) and a CRC32C over the
// new contents of every saved range and of those lines. Record and data are
// flushed together and one fence makes both durable: Update returns then.
// So a transaction costs two durability points, plus one per batch of
// ranges saved after the first.
//
// The log header still names generation g after the commit. The next
// transaction writes g+1 there together with its first entry (in the other
// half, so it cannot tear the committed record) and fences both before it
// modifies anything: from then on g's record is stale.
//
// Recovery reads the header's generation g and the entries of half g%2. If a
// commit record follows them and the saved ranges and fresh lines hold what
// its checksum says, the transaction committed: keep it. Otherwise some of
// its data may not have reached memory, so it never returned: copy the saved
// bytes back. Either way the header then moves on to g+1, durably. A crash
// during recovery is recovered the same way.
//
// When the commit record does not fit in what is left of the half, commit
// falls back to flushing the data, a fence, then moving the header to g+1
// with its own fence: three durability points instead of two.

// logEntry is a checked undo log entry.
type logEntry struct {
	pos       uint64 // where the entry starts in the log
	off, n    uint64 // the range it saves
	dataStart uint64
}

// commitRec is a decoded commit record.
type commitRec struct {
	pos     uint64
	entries uint64      // undo entries before it
	sum     uint32      // CRC32C of the saved ranges, then the runs
	runs    []lineRange // fresh lines written, as line numbers
}

// logHalf returns the part of the log a transaction of generation gen
// writes its entries in.
func (h *Heap) logHalf(gen uint64) (start, end uint64) {
	half := (h.sb.LogSize - logHeaderSize) / 2 &^ 7
	start = h.sb.LogOff + logHeaderSize + gen%2*half
	return start, start + half
}

// setGen writes gen into the log header and flushes it; the caller fences.
func (h *Heap) setGen(gen uint64) {
	le.PutUint64(h.b[h.sb.LogOff+logGen:], gen)
	h.mem.Flush(int(h.sb.LogOff+logGen), 8)
	h.gen, h.genPending = gen, false
}

// retire durably moves the header past generation gen.
func (h *Heap) retire(gen uint64) {
	h.setGen(gen + 1)
	h.mem.Fence()
}

// undo copies the saved ranges of ents back, newest first, makes them
// durable, and only then retires the log generation gen.
func (h *Heap) undo(gen uint64, ents []logEntry) {
	for i := len(ents) - 1; i >= 0; i-- {
		e := ents[i]
		copy(h.b[e.off:e.off+e.n], h.b[e.dataStart:e.dataStart+e.n])
		h.mem.Flush(int(e.off), int(e.n))
	}
	h.mem.Fence()
	h.retire(gen)
}

// dataSum is the checksum a commit record keeps of a transaction's data.
func (h *Heap) dataSum(ents []logEntry, runs []lineRange) uint32 {
	var sum uint32
	for _, e := range ents {
		sum = crc32.Update(sum, castagnoli, h.b[e.off:e.off+e.n])
	}
	for _, r := range runs {
		sum = crc32.Update(sum, castagnoli, h.b[r.first*lineSize:r.end*lineSize])
	}
	return sum
}

// commit makes the transaction durable: with a commit record and one fence,
// or, if the record does not fit, the classic way.
func (tx *Tx) commit() {
	if len(tx.lines) == 0 && len(tx.big) == 0 {
		return
	}
	h := tx.h
	if h.genPending {
		h.setGen(tx.gen) // only if nothing was logged: the record needs it
	}
	lines := tx.sortedLines()
	runs := tx.freshRuns(lines)
	recorded := tx.writeCommitRecord(runs)
	h.flushLines(lines)
	for _, r := range tx.big {
		h.mem.Flush(int(r.first*lineSize), int((r.end-r.first)*lineSize))
	}
	h.mem.Fence()
	if recorded {
		h.gen, h.genPending = tx.gen+1, true
		return
	}
	h.retire(tx.gen)
}

// freshRuns lists the lines the transaction wrote without logging, as runs.
func (tx *Tx) freshRuns(sorted []uint64) []lineRange {
	var runs []lineRange
	for _, l := range sorted {
		if tx.lines[l] != lineFresh {
			continue
		}
		if n := len(runs); n > 0 && runs[n-1].end == l {
			runs[n-1].end++
			continue
		}
		runs = append(runs, lineRange{l, l + 1})
	}
	return append(runs, tx.big...)
}

// writeCommitRecord writes and flushes the commit record after the
// entries; false if it does not fit.
func (tx *Tx) writeCommitRecord(runs []lineRange) bool {
	h := tx.h
	n := crFixed + crRunSize*uint64(len(runs))
	if tx.logTail+entHeaderSize+n > tx.logEnd {
		return false
	}
	e := h.b[tx.logTail : tx.logTail+entHeaderSize+n]
	le.PutUint64(e[entGen:], tx.gen)
	le.PutUint64(e[entOff:], commitOff)
	le.PutUint32(e[entLen:], uint32(n))
	p := e[entHeaderSize:]
	le.PutUint64(p[crEntries:], uint64(len(tx.ents)))
	le.PutUint32(p[crSum:], h.dataSum(tx.ents, runs))
	le.PutUint32(p[crReserved:], 0)
	for i, r := range runs {
		q := p[crFixed+crRunSize*uint64(i):]
		le.PutUint64(q[0:], r.first*lineSize)
		le.PutUint64(q[8:], (r.end-r.first)*lineSize)
	}
	le.PutUint32(e[entChecksum:], crc32.Update(crc32.Checksum(e[:entChecksum], castagnoli), castagnoli, p))
	h.mem.Flush(int(tx.logTail), len(e))
	return true
}

// logState is what scanLog finds in the log.
type logState struct {
	gen  uint64     // the header's generation
	ents []logEntry // that generation's undo entries, in order
	cr   *commitRec // its commit record, if whole
	// torn: the scan ended at bytes of that generation that do not check
	// out, so the log holds bytes of an interrupted transaction even if no
	// entry is whole.
	torn bool
	// next: the transaction after gen had started (its first entry is in
	// the other half), so gen's commit fence had completed.
	next bool
}

// scanLog reads the log. An entry that is torn or stale ends the scan; one
// that checks out but names a range outside the writable regions, or a log
// that contradicts itself, means corruption, not a crash.
func (h *Heap) scanLog() (st logState, err error) {
	sb := &h.sb
	st.gen = h.u64(sb.LogOff + logGen)
	gen := st.gen
	for i, c := range h.b[sb.LogOff+logReserved : sb.LogOff+logHeaderSize] {
		if c != 0 {
			return st, fmt.Errorf("%w: undo log header reserved byte %d is %#x", ErrCorrupt, logReserved+i, c)
		}
	}
	// Generations only grow and each half starts with the newest entry of
	// its parity. The only one newer than the header can be that of the
	// transaction after it, which writes the header in the same fence as
	// its first entry: anything else means the header went back, which
	// would bring stale entries to life.
	for half := range uint64(2) {
		start, end := h.logHalf(half)
		g, _, _, ok := h.entryAt(start, end)
		switch {
		case !ok || g <= gen:
		case g == gen+1 && half == g%2:
			st.next = true
		default:
			return st, fmt.Errorf("%w: undo log holds generation %d, its header says %d", ErrCorrupt, g, gen)
		}
	}
	start, end := h.logHalf(gen)
	for pos := start; pos+entHeaderSize <= end; {
		g, off, n, ok := h.entryAt(pos, end)
		if g != gen {
			break
		}
		if !ok {
			st.torn = true
			break
		}
		e := h.b[pos:end]
		if off == commitOff {
			c, err := h.parseCommit(pos, e[entHeaderSize:entHeaderSize+n])
			if err != nil {
				return st, fmt.Errorf("%w: commit record at %d: %v", ErrCorrupt, pos, err)
			}
			st.cr = &c
			break
		}
		if off%lineSize != 0 || n%lineSize != 0 || off < sb.RootsOff || off > sb.Size || n > sb.Size-off {
			return st, fmt.Errorf("%w: undo log entry at %d saves [%d,+%d), outside the heap's writable part", ErrCorrupt, pos, off, n)
		}
		st.ents = append(st.ents, logEntry{pos: pos, off: off, n: n, dataStart: pos + entHeaderSize})
		pos += entHeaderSize + n
	}
	return st, nil
}

// entryAt reads the entry header at pos (up to end) and reports whether
// the entry is whole: its length fits and its checksum matches.
func (h *Heap) entryAt(pos, end uint64) (gen, off, n uint64, ok bool) {
	if pos+entHeaderSize > end {
		return 0, 0, 0, false
	}
	e := h.b[pos:end]
	gen, off, n = le.Uint64(e[entGen:]), le.Uint64(e[entOff:]), uint64(le.Uint32(e[entLen:]))
	if n == 0 || n > uint64(len(e))-entHeaderSize {
		return gen, off, n, false
	}
	sum := crc32.Update(crc32.Checksum(e[:entChecksum], castagnoli), castagnoli, e[entHeaderSize:entHeaderSize+n])
	return gen, off, n, sum == le.Uint32(e[entChecksum:])
}

// parseCommit decodes a commit record's payload p, which checked out.
func (h *Heap) parseCommit(pos uint64, p []byte) (commitRec, error) {
	c := commitRec{pos: pos}
	if uint64(len(p)) < crFixed || (uint64(len(p))-crFixed)%crRunSize != 0 {
		return c, fmt.Errorf("%d bytes", len(p))
	}
	c.entries, c.sum = le.Uint64(p[crEntries:]), le.Uint32(p[crSum:])
	if le.Uint32(p[crReserved:]) != 0 {
		return c, fmt.Errorf("reserved field not zero")
	}
	for q := p[crFixed:]; len(q) > 0; q = q[crRunSize:] {
		off, n := le.Uint64(q[0:]), le.Uint64(q[8:])
		if off%lineSize != 0 || n%lineSize != 0 || n == 0 || off < h.sb.ArenaOff || off > h.sb.Size || n > h.sb.Size-off {
			return c, fmt.Errorf("fresh run [%d,+%d) outside the arena", off, n)
		}
		c.runs = append(c.runs, lineRange{off / lineSize, (off + n) / lineSize})
	}
	return c, nil
}

// recover finishes what a crash interrupted: it keeps a transaction whose
// commit record checks out and rolls back any other. It first checks the
// metadata as it will be left, on a private copy, so a heap that fails the
// checks is left untouched.
func (h *Heap) recover() error {
	st, err := h.scanLog()
	if err != nil {
		return err
	}
	ents := st.ents
	committed := st.cr != nil && st.cr.entries == uint64(len(ents)) && h.dataSum(ents, st.cr.runs) == st.cr.sum
	if st.next && !committed {
		return fmt.Errorf("%w: undo log: generation %d started after %d, which did not commit", ErrCorrupt, st.gen+1, st.gen)
	}
	sb := &h.sb
	meta := make([]byte, sb.ArenaOff-sb.RootsOff)
	copy(meta, h.b[sb.RootsOff:sb.ArenaOff])
	if !committed {
		for i := len(ents) - 1; i >= 0; i-- {
			e := ents[i]
			for j := uint64(0); j < e.n; j++ {
				if p := e.off + j; p >= sb.RootsOff && p < sb.ArenaOff {
					meta[p-sb.RootsOff] = h.b[e.dataStart+j]
				}
			}
		}
	}
	if err := h.checkMeta(meta); err != nil {
		return err
	}
	switch {
	case committed && st.next:
		// Skip the interrupted next generation too: its partial entries
		// saved ranges it never changed, and must not pass for live ones.
		h.retire(st.gen + 1)
	case committed:
		h.retire(st.gen)
	case len(ents) > 0 || st.torn || st.cr != nil:
		h.undo(st.gen, ents)
	}
	return nil
}
