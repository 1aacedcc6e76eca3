package pheap

import (
	"fmt"
	"hash/crc32"
	"slices"
)

// Reader is a transaction that can read the heap: *ViewTx or *Tx.
type Reader interface {
	heap() *Heap
}

// ViewTx is a read-only transaction. It is valid only inside the function
// passed to View (or, embedded in Tx, to Update).
type ViewTx struct {
	h    *Heap
	done bool
}

func (v *ViewTx) heap() *Heap {
	if v.done {
		panic("pheap: transaction used after its function returned")
	}
	return v.h
}

// Tx is a read-write transaction, valid only inside the function passed to
// Update. Every change made through it is undone if the function fails or
// the process dies before Update returns.
type Tx struct {
	ViewTx
	*txState
}

// txState is the bookkeeping of the running write transaction. The Heap
// keeps one and reuses it (Updates run one at a time), so a small
// transaction allocates almost nothing.
type txState struct {
	gen     uint64
	logTail uint64           // where the next undo entry goes
	logEnd  uint64           // end of this generation's half of the log
	ents    []logEntry       // entries written, for rolling back
	lines   map[uint64]uint8 // cache lines touched: lineLogged or lineFresh
	big     []lineRange      // fresh lines of big blocks, kept as ranges
	freed   map[uint64]bool  // blocks freed by this transaction: not fresh if reused
	sorted  []uint64         // scratch for commit
	// unfenced: entries were flushed but not fenced yet (see save and sync)
	unfenced bool
	err      error // sticky: the first failure dooms the transaction
}

// lineRange is the lines [first, end).
type lineRange struct{ first, end uint64 }

// bigBlockLines is the size from which a fresh block's lines are kept as one
// range instead of one map entry per line.
const bigBlockLines = 8

// reset readies the state for a transaction of generation gen.
func (s *txState) reset(gen, logTail, logEnd uint64) {
	s.gen, s.logTail, s.logEnd, s.err, s.unfenced = gen, logTail, logEnd, nil, false
	s.ents, s.big, s.sorted = s.ents[:0], s.big[:0], s.sorted[:0]
	// A huge map from a big transaction would make every clear slow.
	if s.lines == nil || len(s.lines) > 4096 {
		s.lines = map[uint64]uint8{}
	} else {
		clear(s.lines)
	}
	clear(s.freed)
}

// touched reports whether line l is already saved or fresh.
func (s *txState) touched(l uint64) bool {
	if _, ok := s.lines[l]; ok {
		return true
	}
	for _, r := range s.big {
		if l >= r.first && l < r.end {
			return true
		}
	}
	return false
}

const (
	lineLogged = 1 // the old bytes are in the undo log
	lineFresh  = 2 // inside a block allocated by this transaction: no need
)

// View runs fn in a read-only transaction. Many View calls run at once;
// they wait for a running Update and Update waits for them.
func (h *Heap) View(fn func(tx *ViewTx) error) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return fmt.Errorf("pheap: %s: %w", h.name, ErrClosed)
	}
	tx := &ViewTx{h: h}
	defer func() { tx.done = true }()
	return fn(tx)
}

// Update runs fn in a read-write transaction and commits it if fn returns
// nil: when Update returns nil the changes are durable. If fn returns an
// error or panics, or an operation in it failed, every change is rolled back
// (durably) before Update returns that error or re-raises the panic. One
// Update runs at a time; do not call Update or View from inside fn.
func (h *Heap) Update(fn func(tx *Tx) error) (err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("pheap: %s: %w", h.name, ErrClosed)
	}
	start, end := h.logHalf(h.gen)
	h.txs.reset(h.gen, start, end)
	tx := &Tx{ViewTx: ViewTx{h: h}, txState: &h.txs}
	committed := false
	defer func() {
		tx.done = true
		if !committed {
			tx.rollback()
		}
	}()
	if err = fn(tx); err == nil {
		err = tx.err
	}
	if err != nil {
		return err
	}
	tx.commit()
	committed = true
	return h.memErr()
}

// memErr reports a failure of the persistence layer, such as msync failing.
func (h *Heap) memErr() error {
	if m, ok := h.mem.(interface{ Err() error }); ok {
		if err := m.Err(); err != nil {
			return fmt.Errorf("pheap: %s: %w: %w", h.name, ErrIO, err)
		}
	}
	return nil
}

// fail records the first error of the transaction and returns it.
func (tx *Tx) fail(err error) error {
	if tx.err == nil {
		tx.err = err
	}
	return tx.err
}

// Err returns the error that doomed the transaction, if any: after a failed
// operation Update rolls back even if the function returns nil.
func (tx *Tx) Err() error { return tx.err }

// Write copies b into the heap at offset off, saving the old bytes first.
// Offsets below the root table (superblock, log) are refused.
func (tx *Tx) Write(off uint64, b []byte) error {
	if err := tx.prepare(off, uint64(len(b))); err != nil {
		return err
	}
	copy(tx.h.b[off:], b)
	return nil
}

// Read returns a copy of n bytes at off.
func (v *ViewTx) Read(off, n uint64) ([]byte, error) {
	h := v.heap()
	if off > h.sb.Size || n > h.sb.Size-off {
		return nil, fmt.Errorf("pheap: read [%d,+%d): %w: outside the heap", off, n, ErrBadPtr)
	}
	return append([]byte(nil), h.b[off:off+n]...), nil
}

// prepare makes [off, off+n) safe to modify: every cache line of it is
// either already saved in the undo log, inside a block this transaction
// allocated, or gets saved now. The new entries are made durable with one
// fence before prepare returns, so only then may the caller write.
func (tx *Tx) prepare(off, n uint64) error {
	if err := tx.save(off, n); err != nil {
		return err
	}
	tx.sync()
	return nil
}

// save is prepare without the fence: the caller may save several ranges
// and then call sync once before writing to any of them.
func (tx *Tx) save(off, n uint64) error {
	h := tx.heap()
	if tx.err != nil {
		return tx.err
	}
	if n == 0 {
		return nil
	}
	if off < h.sb.RootsOff || off > h.sb.Size || n > h.sb.Size-off {
		return tx.fail(fmt.Errorf("pheap: write [%d,+%d): %w: outside the writable heap", off, n, ErrBadPtr))
	}
	first, last := off/lineSize, (off+n-1)/lineSize
	for l := first; l <= last; {
		if tx.touched(l) {
			l++
			continue
		}
		run := l
		for l <= last && !tx.touched(l) {
			l++
		}
		if err := tx.logRange(run*lineSize, (l-run)*lineSize); err != nil {
			return err
		}
		for r := run; r < l; r++ {
			tx.lines[r] = lineLogged
		}
		tx.unfenced = true
	}
	return nil
}

// sync makes the entries saved since the last sync durable.
func (tx *Tx) sync() {
	if tx.unfenced {
		tx.h.mem.Fence()
		tx.unfenced = false
	}
}

// logRange appends an undo entry saving [off, off+n) and flushes it; the
// caller fences.
func (tx *Tx) logRange(off, n uint64) error {
	h := tx.h
	if tx.logTail+entHeaderSize+n > tx.logEnd {
		return tx.fail(fmt.Errorf("pheap: %w: saving %d more bytes, a transaction's log holds %d", ErrLogFull, n, tx.logEnd-tx.logTail))
	}
	if h.genPending {
		// The header moves to this generation in the same fence as the
		// first entry, before anything the entry saves is modified.
		h.setGen(tx.gen)
	}
	pos := tx.logTail
	e := h.b[pos : pos+entHeaderSize+n]
	le.PutUint64(e[entGen:], tx.gen)
	le.PutUint64(e[entOff:], off)
	le.PutUint32(e[entLen:], uint32(n))
	copy(e[entHeaderSize:], h.b[off:off+n])
	sum := crc32.Update(crc32.Checksum(e[:entChecksum], castagnoli), castagnoli, e[entHeaderSize:])
	le.PutUint32(e[entChecksum:], sum)
	h.mem.Flush(int(pos), len(e))
	tx.ents = append(tx.ents, logEntry{pos: pos, off: off, n: n, dataStart: pos + entHeaderSize})
	tx.logTail += entHeaderSize + n
	return nil
}

// markFresh records that the lines wholly inside [off, off+n) belong to a
// block this transaction allocated: their old bytes need no saving, since
// rolling back the allocation makes them garbage again.
func (tx *Tx) markFresh(off, n uint64) {
	first, end := (off+lineSize-1)/lineSize, (off+n)/lineSize
	if end >= first+bigBlockLines {
		// Lines already saved stay in the map; flushing them twice at
		// commit is harmless.
		tx.big = append(tx.big, lineRange{first, end})
		return
	}
	for l := first; l < end; l++ {
		if _, ok := tx.lines[l]; !ok {
			tx.lines[l] = lineFresh
		}
	}
}

// sortedLines returns the lines in the map in order, for flushing in runs.
func (tx *Tx) sortedLines() []uint64 {
	ls := tx.sorted[:0]
	for l := range tx.lines {
		ls = append(ls, l)
	}
	slices.Sort(ls)
	tx.sorted = ls
	return ls
}

// flushLines flushes the given sorted lines, coalescing neighbours.
func (h *Heap) flushLines(ls []uint64) {
	for i := 0; i < len(ls); {
		j := i + 1
		for j < len(ls) && ls[j] == ls[j-1]+1 {
			j++
		}
		h.mem.Flush(int(ls[i]*lineSize), int(uint64(j-i)*lineSize))
		i = j
	}
}

// rollback restores every saved range, newest first, makes that durable,
// then retires the log, exactly as recovery would after a crash.
func (tx *Tx) rollback() {
	if len(tx.ents) == 0 {
		return
	}
	tx.h.undo(tx.gen, tx.ents)
}
