package pheap

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"slices"
	"sort"
)

// The commit protocol (formats in layout.go).
//
// A write transaction of generation g uses log area g%2. Each cache line
// it changes is one of:
//
//   - fresh: wholly inside a block it allocated. The old bytes mean nothing
//     to anyone else, so nothing is saved.
//   - covered: written by the newest committed transaction, whose commit
//     record holds the line's committed contents as redo. It is changed in
//     place without saving: a rollback or recovery copies it back from
//     that record.
//   - deferred: a map slot (Map.put). Its new bytes wait in the transaction
//     state and reach the line only after the commit fence.
//   - logged: anything else. An undo entry saves it, and a fence makes the
//     entry durable before the line changes, because a cache may write the
//     line back to memory at any moment after the store. This is the only
//     kind that costs a fence before the commit.
//
// Commit writes one record after the undo entries: the redo runs (the new
// contents of every logged, covered and deferred line), the in-place runs
// (the fresh lines) and a checksum of the in-place runs' contents. Record,
// fresh and logged lines are flushed and one fence makes them durable:
// Update returns then. The transaction is committed when its record is
// whole and the in-place runs hold what the checksum says. Then the
// deferred bytes are stored and flushed without a fence; the next fence
// (the next transaction's, a rollback's, Close's) makes them durable, and
// until then the record stands for them.
//
// So a transaction that changes only fresh, covered and deferred lines
// costs one fence. Each batch of logged lines adds one: for a line whose
// committed bytes are in no durable record, one fence before the store
// cannot be avoided (a cache write-back is not ordered with the flush of
// an undo copy written in the same epoch, non-temporal or not).
//
// Area reuse: transaction g+1 writes the other area and relies on g's
// record for covered lines. Transaction g+2 overwrites g's record only
// after g+1's commit fence, which made g's deferred stores durable (they
// were flushed before it). A rollback keeps the generation: the next
// attempt writes the same area with a new nonce, so stale entries of the
// rolled-back attempt never pass for its own.
//
// The in-place checksum of the newest committed record must stay true
// while the next transaction runs, as recovery may test it. That
// transaction changes without first writing to its area only covered
// lines (redo, not in-place runs), its own fresh lines and the headers of
// the free blocks it splits off (lineNew, which go in its redo), all of
// which lie past the allocator's Top at the last commit or in the payload
// of a free block (past its header and links). So commit leaves out of its
// in-place runs the payload lines of every free block the transaction
// made or changed (a block it allocated and freed, merged with a
// neighbour or split) and every line past Top (a block it allocated there
// and gave back): they are the only fresh lines of the record that a
// later transaction may reuse without an entry. Their bytes mean nothing
// once the transaction commits, so leaving them unchecked loses nothing.
//
// Recovery reads the Gen word of both areas' first entries. The larger, N,
// is the newest transaction that wrote to the log; the other area holds
// N-1 (or nothing when N is 1). If N committed, recovery stores N's redo
// runs again where the lines differ (a crash may have come before the
// deferred stores were durable); N-1's entries are dead then and are not
// read. Otherwise N was interrupted: recovery
// copies its undo entries back, newest first, then N-1's redo runs, which
// restores covered lines; N-1's commit needs no test, since N wrote to the
// log only after N-1's Update returned. A whole record of the interrupted
// N is then spoilt, so it can never pass for a later attempt's. A
// rollback in the running program does the same. A crash during recovery
// is recovered the same way.
//
// A transaction whose full record does not fit in what is left of its area
// saves its deferred lines, flushes its data, fences, and only then writes
// a record without runs, with a fence of its own: two fences, and no
// covered lines for the next transaction.
//
// Close ends the log the same way: after its fence the deferred stores are
// durable, so it commits an empty generation, a record without runs at
// the start of the next area (one flush, one fence). The next Open then
// finds a newest record with nothing to store again and no in-place runs
// to test, and reads nothing but the superblock, the log and the metadata
// before the arena: open after a clean shutdown costs the same for any
// heap size. After a crash it re-stores the newest record's redo runs,
// work in proportion to the last transaction, never to the heap. A crash
// during Close is a crash at the start of a transaction that changed
// nothing.

// breakProtocol is set only by tests: it turns off one named step of the
// protocol, so the crash tests can show they catch that step's absence.
var breakProtocol string

// logEntry is a checked undo log entry.
type logEntry struct {
	pos       uint64 // where the entry starts in the log
	off, n    uint64 // the range it saves
	dataStart uint64
}

// redoRun is the lines [first, end), whose committed contents are at data
// in the log.
type redoRun struct{ first, end, data uint64 }

// commitRec is a decoded commit record.
type commitRec struct {
	pos     uint64
	undo    uint64      // undo entries before it
	sum     uint32      // CRC32C of the in-place runs
	inPlace []lineRange // as line numbers
	redo    []redoRun
}

// areaState is what scanArea finds in one log area.
type areaState struct {
	gen   uint64 // Gen word of the first entry; 0 if never written
	whole bool   // the first entry checks out
	nonce uint64
	ents  []logEntry
	cr    *commitRec
}

// logArea returns the part of the log a transaction of generation gen
// writes in.
func (h *Heap) logArea(gen uint64) (start, end uint64) {
	half := (h.sb.LogSize - logHeaderSize) / 2 &^ 7
	start = h.sb.LogOff + logHeaderSize + gen%2*half
	return start, start + half
}

// areaStart is where log area a (0 or 1) starts: its first entry's Gen word.
func (h *Heap) areaStart(a uint64) uint64 {
	start, _ := h.logArea(a)
	return start
}

// covers reports whether line l is in the newest committed record's redo
// runs (sorted, disjoint).
func (h *Heap) covers(l uint64) bool {
	c := h.cover
	if len(c) <= 8 {
		for _, r := range c {
			if l >= r.first && l < r.end {
				return true
			}
		}
		return false
	}
	i := sort.Search(len(c), func(i int) bool { return c[i].end > l })
	return i < len(c) && c[i].first <= l
}

// restoreCovered copies line l back from the newest committed record and
// flushes it; the caller fences.
func (h *Heap) restoreCovered(l uint64) {
	for _, r := range h.cover {
		if l >= r.first && l < r.end {
			src := r.data + (l-r.first)*lineSize
			copy(h.b[l*lineSize:(l+1)*lineSize], h.b[src:src+lineSize])
			h.mem.Flush(int(l*lineSize), lineSize)
			return
		}
	}
}

// inPlaceSum is the checksum a commit record keeps of its in-place runs.
func (h *Heap) inPlaceSum(runs []lineRange) uint32 {
	var sum uint32
	for _, r := range runs {
		sum = crc32.Update(sum, castagnoli, h.b[r.first*lineSize:r.end*lineSize])
	}
	return sum
}

// commit makes the transaction durable.
func (tx *Tx) commit() {
	if len(tx.lines) == 0 && len(tx.big) == 0 {
		return
	}
	h := tx.h
	if breakProtocol != "unfenced-redo" {
		// The last commit's deferred stores may reach memory after this
		// record: it must stand for them too. They are in the last
		// record's redo, so covered; they were flushed already.
		for _, l := range h.unfenced {
			if _, ok := tx.lines[l]; !ok {
				tx.mark(l, lineCarried)
			}
		}
	}
	lines := tx.sortedLines()
	kinds := tx.kinds
	inPlace := tx.inPlaceRuns(lines)
	size := uint64(entHeaderSize + crFixed + crRunSize*len(inPlace))
	nredo := 0
	for i := 0; i < len(lines); {
		j := runEnd(lines, kinds, i)
		if kinds[i] != lineFresh {
			size += crRunSize + uint64(j-i)*lineSize
			nredo++
		}
		i = j
	}
	if tx.logTail+size > tx.logEnd {
		tx.commitSlow()
		return
	}
	pos := tx.logTail
	e := h.b[pos : pos+size]
	p := e[entHeaderSize:]
	le.PutUint64(p[crUndo:], uint64(len(tx.ents)))
	le.PutUint32(p[crSum:], h.inPlaceSum(inPlace))
	le.PutUint32(p[crReserved:], 0)
	le.PutUint32(p[crInPlace:], uint32(len(inPlace)))
	le.PutUint32(p[crRedo:], uint32(nredo))
	q := uint64(crFixed)
	for _, r := range inPlace {
		le.PutUint64(p[q:], r.first*lineSize)
		le.PutUint64(p[q+8:], (r.end-r.first)*lineSize)
		q += crRunSize
	}
	cover := h.cover[:0]
	for i := 0; i < len(lines); {
		j := runEnd(lines, kinds, i)
		if kinds[i] == lineFresh {
			i = j
			continue
		}
		off, n := lines[i]*lineSize, uint64(j-i)*lineSize
		le.PutUint64(p[q:], off)
		le.PutUint64(p[q+8:], n)
		q += crRunSize
		copy(p[q:q+n], h.b[off:off+n])
		tx.overlayDeferred(p[q:q+n], off)
		cover = append(cover, redoRun{lines[i], lines[j-1] + 1, pos + entHeaderSize + q})
		q += n
		i = j
	}
	tx.putHeader(e, commitOff)
	h.mem.Flush(int(pos), len(e))
	h.flushLines(lines, kinds, false)
	for _, r := range tx.big {
		h.mem.Flush(int(r.first*lineSize), int((r.end-r.first)*lineSize))
	}
	h.mem.Fence()
	h.cover = cover
	h.gen++
	tx.applyDeferred() // replaces h.unfenced
}

// commitSlow commits a transaction whose full record does not fit: the
// data is made durable first, then a record without runs says so.
func (tx *Tx) commitSlow() {
	h := tx.h
	if err := tx.materialize(); err != nil {
		panic(fmt.Sprintf("pheap: saving deferred lines, for which log space was kept: %v", err))
	}
	lines := tx.sortedLines() // materialize changes the lines' kinds
	h.flushLines(lines, tx.kinds, true)
	for _, r := range tx.big {
		h.mem.Flush(int(r.first*lineSize), int((r.end-r.first)*lineSize))
	}
	h.mem.Fence()
	e := h.b[tx.logTail : tx.logTail+minRecord]
	p := e[entHeaderSize:]
	clear(p)
	le.PutUint64(p[crUndo:], uint64(len(tx.ents)))
	tx.putHeader(e, commitOff)
	h.mem.Flush(int(tx.logTail), len(e))
	h.mem.Fence()
	h.cover = h.cover[:0]
	h.unfenced = h.unfenced[:0]
	h.gen++
}

// retire commits an empty generation: a record without runs at the start
// of the next area, so recovery finds nothing to store again (see Close in
// the protocol). The caller fenced the deferred stores. A heap whose newest
// record has no runs already is left alone, so open and close without an
// Update write nothing.
func (h *Heap) retire() {
	if len(h.cover) == 0 && len(h.unfenced) == 0 {
		return
	}
	start, _ := h.logArea(h.gen)
	var e [minRecord]byte
	putEntryHeader(e[:], h.gen, h.nonce(), commitOff)
	copy(h.b[start:], e[:])
	h.mem.Flush(int(start), len(e))
	h.mem.Fence()
	h.gen++
	h.cover = h.cover[:0]
	h.unfenced = h.unfenced[:0]
}

// putHeader fills in the entry header of e, whose data follows it, with
// its checksum.
func (tx *Tx) putHeader(e []byte, off uint64) {
	putEntryHeader(e, tx.gen, tx.nonce, off)
}

// putEntryHeader fills in the entry header of e for generation gen.
func putEntryHeader(e []byte, gen, nonce, off uint64) {
	le.PutUint64(e[entGen:], gen)
	le.PutUint64(e[entNonce:], nonce)
	le.PutUint64(e[entOff:], off)
	le.PutUint32(e[entLen:], uint32(len(e)-entHeaderSize))
	le.PutUint32(e[entChecksum:], crc32.Update(crc32.Checksum(e[:entChecksum], castagnoli), castagnoli, e[entHeaderSize:]))
}

// runEnd returns the end of the run of consecutive lines of one kind
// (fresh or not) that starts at lines[i].
func runEnd(lines []uint64, kinds []uint8, i int) int {
	fresh := kinds[i] == lineFresh
	j := i + 1
	for j < len(lines) && lines[j] == lines[j-1]+1 && (kinds[j] == lineFresh) == fresh {
		j++
	}
	return j
}

// inPlaceRuns lists the lines the commit record checks in place: fresh
// lines, minus lines also in redo, the payload lines of the free blocks the
// transaction made or changed, and the lines past Top (see the protocol).
func (tx *Tx) inPlaceRuns(sorted []uint64) []lineRange {
	runs := tx.runs[:0]
	var holes []lineRange
	for i, l := range sorted {
		if tx.kinds[i] == lineFresh {
			runs = appendLine(runs, l)
		} else if len(tx.big) > 0 {
			holes = appendLine(holes, l)
		}
	}
	if len(tx.big) > 0 {
		runs = mergeRuns(append(runs, tx.big...))
	}
	if breakProtocol != "dead-lines" {
		// The payload of a free block, and everything past Top, is where
		// the next transaction allocates from without saving anything.
		for blk, size := range tx.freeBlocks {
			first, end := (blk+freeHeaderSize+lineSize-1)/lineSize, (blk+size)/lineSize
			if end > first {
				holes = append(holes, lineRange{first, end})
			}
		}
		if top := (tx.h.top() + lineSize - 1) / lineSize; len(runs) > 0 && runs[len(runs)-1].end > top {
			holes = append(holes, lineRange{top, tx.h.sb.Size / lineSize})
		}
	}
	if len(holes) > 0 {
		runs = subtractRuns(runs, mergeRuns(holes))
	}
	tx.runs = runs
	return runs
}

// appendLine adds line l to sorted runs.
func appendLine(runs []lineRange, l uint64) []lineRange {
	if n := len(runs); n > 0 && runs[n-1].end == l {
		runs[n-1].end++
		return runs
	}
	return append(runs, lineRange{l, l + 1})
}

// mergeRuns sorts runs and joins those that overlap or touch.
func mergeRuns(runs []lineRange) []lineRange {
	slices.SortFunc(runs, func(a, b lineRange) int { return int(a.first) - int(b.first) })
	out := runs[:0]
	for _, r := range runs {
		if n := len(out); n > 0 && r.first <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, r.end)
			continue
		}
		out = append(out, r)
	}
	return out
}

// subtractRuns returns runs without the lines in holes; both sorted and
// merged.
func subtractRuns(runs, holes []lineRange) []lineRange {
	var out []lineRange
	k := 0
	for _, r := range runs {
		for r.first < r.end {
			for k < len(holes) && holes[k].end <= r.first {
				k++
			}
			if k == len(holes) || holes[k].first >= r.end {
				out = append(out, r)
				break
			}
			if holes[k].first > r.first {
				out = append(out, lineRange{r.first, holes[k].first})
			}
			r.first = holes[k].end
		}
	}
	return out
}

// scanArea reads log area a. An entry that is torn, stale or of another
// attempt ends the scan; one that checks out but names a range outside
// the writable regions means corruption, not a crash.
func (h *Heap) scanArea(a uint64) (st areaState, err error) {
	start, end := h.logArea(a)
	st.gen = h.u64(start)
	if st.gen != 0 && st.gen%2 != a {
		return st, fmt.Errorf("%w: log area %d starts with generation %d", ErrCorrupt, a, st.gen)
	}
	for pos := start; ; {
		g, nonce, off, n, ok := h.entryAt(pos, end)
		if !ok || g != st.gen || (st.whole && nonce != st.nonce) {
			return st, nil
		}
		st.whole, st.nonce = true, nonce
		if off == commitOff {
			c, err := h.parseCommit(pos, h.b[pos+entHeaderSize:pos+entHeaderSize+n])
			if err != nil {
				return st, fmt.Errorf("%w: commit record at %d: %v", ErrCorrupt, pos, err)
			}
			st.cr = &c
			return st, nil
		}
		sb := &h.sb
		if off%lineSize != 0 || n%lineSize != 0 || off < sb.RootsOff || off > sb.Size || n > sb.Size-off {
			return st, fmt.Errorf("%w: undo log entry at %d saves [%d,+%d), outside the heap's writable part", ErrCorrupt, pos, off, n)
		}
		st.ents = append(st.ents, logEntry{pos: pos, off: off, n: n, dataStart: pos + entHeaderSize})
		pos += entHeaderSize + n
	}
}

// entryAt reads the entry header at pos (up to end) and reports whether
// the entry is whole: its length fits and its checksum matches.
func (h *Heap) entryAt(pos, end uint64) (gen, nonce, off, n uint64, ok bool) {
	if pos+entHeaderSize > end {
		return 0, 0, 0, 0, false
	}
	e := h.b[pos:end]
	gen, nonce, off, n = le.Uint64(e[entGen:]), le.Uint64(e[entNonce:]), le.Uint64(e[entOff:]), uint64(le.Uint32(e[entLen:]))
	if n == 0 || n > uint64(len(e))-entHeaderSize {
		return gen, nonce, off, n, false
	}
	sum := crc32.Update(crc32.Checksum(e[:entChecksum], castagnoli), castagnoli, e[entHeaderSize:entHeaderSize+n])
	return gen, nonce, off, n, sum == le.Uint32(e[entChecksum:])
}

// parseCommit decodes a commit record's payload p, which checked out.
func (h *Heap) parseCommit(pos uint64, p []byte) (commitRec, error) {
	c := commitRec{pos: pos}
	if uint64(len(p)) < crFixed {
		return c, fmt.Errorf("%d bytes", len(p))
	}
	c.undo, c.sum = le.Uint64(p[crUndo:]), le.Uint32(p[crSum:])
	if le.Uint32(p[crReserved:]) != 0 {
		return c, fmt.Errorf("reserved field not zero")
	}
	ni, nr := uint64(le.Uint32(p[crInPlace:])), uint64(le.Uint32(p[crRedo:]))
	if ni > (uint64(len(p))-crFixed)/crRunSize {
		return c, fmt.Errorf("%d in-place runs in %d bytes", ni, len(p))
	}
	sb := &h.sb
	// Runs must be line aligned, inside the writable part, in order and
	// disjoint: recovery and the next transaction look lines up in them.
	prev := uint64(0)
	bad := func(off, n, lo uint64) bool {
		return off%lineSize != 0 || n%lineSize != 0 || n == 0 || off < lo || off > sb.Size || n > sb.Size-off || off/lineSize < prev
	}
	q := p[crFixed:]
	for range ni {
		off, n := le.Uint64(q[0:]), le.Uint64(q[8:])
		if bad(off, n, sb.ArenaOff) {
			return c, fmt.Errorf("in-place run [%d,+%d) outside the arena or out of order", off, n)
		}
		c.inPlace = append(c.inPlace, lineRange{off / lineSize, (off + n) / lineSize})
		prev = (off + n) / lineSize
		q = q[crRunSize:]
	}
	prev = 0
	for range nr {
		if len(q) < crRunSize {
			return c, fmt.Errorf("redo runs past the record's end")
		}
		off, n := le.Uint64(q[0:]), le.Uint64(q[8:])
		if bad(off, n, sb.RootsOff) || n > uint64(len(q))-crRunSize {
			return c, fmt.Errorf("redo run [%d,+%d) outside the heap's writable part, out of order or past the record", off, n)
		}
		data := pos + entHeaderSize + uint64(len(p)-len(q)) + crRunSize
		c.redo = append(c.redo, redoRun{off / lineSize, (off + n) / lineSize, data})
		prev = (off + n) / lineSize
		q = q[crRunSize+n:]
	}
	if len(q) != 0 {
		return c, fmt.Errorf("%d bytes after the last run", len(q))
	}
	return c, nil
}

// committed reports whether the transaction in area st committed.
func (h *Heap) committed(st *areaState) bool {
	if !st.whole || st.cr == nil || st.cr.undo != uint64(len(st.ents)) {
		return false
	}
	return breakProtocol == "inplace-sum" || h.inPlaceSum(st.cr.inPlace) == st.cr.sum
}

// recover finishes what a crash interrupted (see the protocol). It first
// checks the metadata as it will be left, on a private copy, so a heap that
// fails the checks is left untouched; and it writes only bytes that differ,
// so a heap closed cleanly is not written at all.
func (h *Heap) recover() error {
	sb := &h.sb
	for i, c := range h.b[sb.LogOff : sb.LogOff+logHeaderSize] {
		if c != 0 {
			return fmt.Errorf("%w: log header byte %d is %#x, must be zero", ErrCorrupt, i, c)
		}
	}
	// The Gen words tell which area is the newest. The other one is read
	// only when the newest did not commit: after a commit (and after Close)
	// its entries are dead, and reading them would cost time in proportion
	// to the transaction before.
	var gens [2]uint64
	for a := range uint64(2) {
		gens[a] = h.u64(h.areaStart(a))
		if gens[a] != 0 && gens[a]%2 != a {
			return fmt.Errorf("%w: log area %d starts with generation %d", ErrCorrupt, a, gens[a])
		}
	}
	newest := uint64(0)
	if gens[1] > gens[0] {
		newest = 1
	}
	n, p := &areaState{}, &areaState{gen: gens[1-newest]}
	var err error
	if *n, err = h.scanArea(newest); err != nil {
		return err
	}
	if n.gen != 0 && p.gen != n.gen-1 && !(n.gen == 1 && p.gen == 0) {
		return fmt.Errorf("%w: log areas hold generations %d and %d, not consecutive", ErrCorrupt, n.gen, p.gen)
	}
	var undo []logEntry
	var redo []redoRun
	interrupted := n.gen != 0 && !h.committed(n)
	if interrupted {
		if *p, err = h.scanArea(1 - newest); err != nil {
			return err
		}
	}
	switch {
	case n.gen == 0:
		h.gen = 1 // no transaction wrote to the log yet
	case interrupted:
		if p.gen != 0 && (!p.whole || p.cr == nil || p.cr.undo != uint64(len(p.ents))) {
			return fmt.Errorf("%w: log: generation %d started after %d, whose commit record is missing", ErrCorrupt, n.gen, p.gen)
		}
		undo = n.ents
		if p.cr != nil && breakProtocol != "cover-restore" {
			redo = p.cr.redo
		}
		h.gen = n.gen
	default:
		if breakProtocol != "redo-reapply" {
			redo = n.cr.redo
		}
		h.gen = n.gen + 1
	}
	meta := bytes.Clone(h.b[sb.RootsOff:sb.ArenaOff])
	h.replay(undo, redo, func(dst uint64, src []byte) {
		for j, c := range src {
			if d := dst + uint64(j); d >= sb.RootsOff && d < sb.ArenaOff {
				meta[d-sb.RootsOff] = c
			}
		}
	})
	if err := h.checkMeta(meta); err != nil {
		return err
	}
	wrote := false
	h.replay(undo, redo, func(dst uint64, src []byte) {
		if !bytes.Equal(h.b[dst:dst+uint64(len(src))], src) {
			copy(h.b[dst:], src)
			h.mem.Flush(int(dst), len(src))
			wrote = true
		}
	})
	if wrote {
		h.mem.Fence()
	}
	if interrupted && n.cr != nil && breakProtocol != "record-destroy" {
		// A whole record whose in-place runs did not check out must never
		// pass for the next attempt's: clear its Len and Checksum (one
		// 8-byte word, so it cannot tear). Its Gen stays, so a record at
		// the start of the area still says generation N started there.
		le.PutUint64(h.b[n.cr.pos+entLen:], 0)
		h.mem.Flush(int(n.cr.pos+entLen), 8)
		h.mem.Fence()
	}
	if interrupted {
		if p.cr != nil {
			redo = p.cr.redo
		}
	}
	h.cover = append(h.cover[:0], redo...)
	return nil
}

// replay calls put with the undo entries' saved bytes, newest first, then
// with the redo runs' bytes.
func (h *Heap) replay(undo []logEntry, redo []redoRun, put func(dst uint64, src []byte)) {
	for i := len(undo) - 1; i >= 0; i-- {
		e := undo[i]
		put(e.off, h.b[e.dataStart:e.dataStart+e.n])
	}
	for _, r := range redo {
		put(r.first*lineSize, h.b[r.data:r.data+(r.end-r.first)*lineSize])
	}
}
