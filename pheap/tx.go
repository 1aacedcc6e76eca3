package pheap

import (
	"fmt"
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
	nonce   uint64           // this attempt's, in every entry it writes
	logTail uint64           // where the next entry goes
	logEnd  uint64           // end of this generation's log area
	ents    []logEntry       // entries written, for rolling back
	lines   map[uint64]uint8 // cache lines touched: lineLogged, lineFresh, ...
	order   []uint64         // the keys of lines, so commit need not range over the map
	big     []lineRange      // fresh lines of big blocks, kept as ranges
	// freedData: the payloads of the blocks this transaction freed. They
	// may hold committed data, which a rollback brings back: an allocation
	// later in the transaction saves those lines instead of taking them
	// for fresh.
	freedData [][2]uint64
	// freeBlocks: the free blocks this transaction made or changed, offset
	// to size, exactly as they stand: commit leaves their payload lines
	// out of its in-place runs (see the protocol in log.go).
	freeBlocks map[uint64]uint64
	st         allocStage  // the allocator operation's changes, reused
	sorted     []uint64    // scratch for commit
	kinds      []uint8     // scratch for commit: the kinds of sorted
	runs       []lineRange // scratch for commit
	// deferred: stores to lineDeferred lines, in order, kept out of the
	// heap until the commit fence; their bytes are in deferBuf.
	deferred []deferredStore
	deferBuf []byte
	// reserve: log bytes that saving the deferred lines would take, kept
	// free so a commit that must save them can.
	reserve uint64
	// unfenced: entries were flushed but not fenced yet (see save and sync)
	unfenced bool
	err      error // sticky: the first failure dooms the transaction
}

// deferredStore is a store waiting for the commit: n bytes at off, from
// deferBuf[buf:].
type deferredStore struct{ off, n, buf uint64 }

// lineRange is the lines [first, end).
type lineRange struct{ first, end uint64 }

// bigBlockLines is the size from which a fresh block's lines are kept as one
// range instead of one map entry per line.
const bigBlockLines = 8

// reset readies the state for a transaction of generation gen.
func (s *txState) reset(gen, nonce, logTail, logEnd uint64) {
	s.gen, s.nonce, s.logTail, s.logEnd, s.err, s.unfenced = gen, nonce, logTail, logEnd, nil, false
	s.ents, s.big, s.sorted, s.order = s.ents[:0], s.big[:0], s.sorted[:0], s.order[:0]
	s.deferred, s.deferBuf, s.reserve = s.deferred[:0], s.deferBuf[:0], 0
	s.freedData = s.freedData[:0]
	// A huge map from a big transaction would make every clear slow.
	if s.lines == nil || len(s.lines) > 4096 {
		s.lines = map[uint64]uint8{}
	} else {
		clear(s.lines)
	}
	clear(s.freeBlocks)
}

// mark sets the kind of line l.
func (s *txState) mark(l uint64, kind uint8) {
	if _, ok := s.lines[l]; !ok {
		s.order = append(s.order, l)
	}
	s.lines[l] = kind
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
	lineLogged   = 1 // the old bytes are in the undo log
	lineFresh    = 2 // inside a block allocated by this transaction: no need
	lineCovered  = 3 // the committed bytes are in the last commit record's redo
	lineDeferred = 4 // stores to it wait for the commit (deferred)
	// lineCarried: untouched, but stored by the last commit after its fence:
	// in this record's redo, and already flushed (see commit)
	lineCarried = 5
	// lineNew: garbage when the transaction started (free space), now a
	// new free block's header: nothing to save, and in the commit record's
	// redo, so the next transaction may change it unsaved
	lineNew = 6
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
	start, end := h.logArea(h.gen)
	h.txs.reset(h.gen, h.nonce(), start, end)
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
// Offsets below the root table (superblock, log) are refused. The bytes of
// a String or Bytes must not be changed with it: they would no longer
// match their checksum, and every later read of them fails (ErrChecksum).
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
	if err := h.settle(off, n); err != nil {
		return nil, err
	}
	return append([]byte(nil), h.b[off:off+n]...), nil
}

// prepare makes [off, off+n) safe to modify: every cache line of it is
// either already saved in the undo log, inside a block this transaction
// allocated, in the last commit record's redo, or gets saved now. The new
// entries are made durable with one fence before prepare returns, so only
// then may the caller write.
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
	if err := tx.check(off, n); err != nil || n == 0 {
		return err
	}
	first, last := off/lineSize, (off+n-1)/lineSize
	if len(tx.deferred) > 0 && tx.deferredIn(first, last) {
		if err := tx.materialize(); err != nil {
			return err
		}
	}
	for l := first; l <= last; {
		if tx.touched(l) {
			l++
			continue
		}
		if h.covers(l) {
			tx.mark(l, lineCovered)
			l++
			continue
		}
		run := l
		for l <= last && !tx.touched(l) && !h.covers(l) {
			l++
		}
		if err := tx.logRange(run*lineSize, (l-run)*lineSize); err != nil {
			return err
		}
		for r := run; r < l; r++ {
			tx.mark(r, lineLogged)
		}
		tx.unfenced = true
	}
	return nil
}

// check refuses a write outside the writable heap, and any write once the
// transaction failed.
func (tx *Tx) check(off, n uint64) error {
	h := tx.heap()
	if tx.err != nil {
		return tx.err
	}
	if off < h.sb.RootsOff || off > h.sb.Size || n > h.sb.Size-off {
		return tx.fail(fmt.Errorf("pheap: write [%d,+%d): %w: outside the writable heap", off, n, ErrBadPtr))
	}
	return nil
}

// writeLater stores b at off like Write, but keeps the bytes out of the
// heap until the commit fence when a line would otherwise need an undo
// entry and its fence (see the protocol in log.go). Nothing may read those
// lines in place before the commit: it is for the map's slots, which only
// the map reads, through Heap.object, which settles them first.
func (tx *Tx) writeLater(off uint64, b []byte) error {
	h := tx.heap()
	n := uint64(len(b))
	if err := tx.check(off, n); err != nil || n == 0 {
		return err
	}
	first, last := off/lineSize, (off+n-1)/lineSize
	safe, pending := 0, 0
	need := uint64(0)
	for l := first; l <= last; l++ {
		switch k, ok := tx.lines[l]; {
		case ok && k == lineDeferred:
			pending++
		case ok || tx.touched(l) || h.covers(l):
			safe++
		default:
			pending++
			need += entHeaderSize + lineSize
		}
	}
	switch {
	case pending == 0:
		for l := first; l <= last; l++ {
			if !tx.touched(l) {
				tx.mark(l, lineCovered)
			}
		}
		copy(h.b[off:], b)
		return nil
	case safe == 0 && breakProtocol == "defer-in-place":
		for l := first; l <= last; l++ {
			tx.mark(l, lineCovered)
		}
		copy(h.b[off:], b)
		return nil
	case safe == 0 && tx.logTail+tx.reserve+need+minRecord <= tx.logEnd:
		for l := first; l <= last; l++ {
			tx.mark(l, lineDeferred)
		}
		tx.reserve += need
		tx.deferred = append(tx.deferred, deferredStore{off, n, uint64(len(tx.deferBuf))})
		tx.deferBuf = append(tx.deferBuf, b...)
		return nil
	}
	if err := tx.materialize(); err != nil {
		return err
	}
	return tx.Write(off, b)
}

// deferredIn reports whether a line in [first, last] is deferred.
func (tx *Tx) deferredIn(first, last uint64) bool {
	for _, d := range tx.deferred {
		if d.off/lineSize <= last && (d.off+d.n-1)/lineSize >= first {
			return true
		}
	}
	return false
}

// settle makes the heap bytes [off, off+n) current for a reader inside the
// running Update: deferred stores there are saved and done now.
func (h *Heap) settle(off, n uint64) error {
	s := &h.txs
	if len(s.deferred) == 0 || n == 0 {
		return nil
	}
	tx := &Tx{ViewTx: ViewTx{h: h}, txState: s}
	if !tx.deferredIn(off/lineSize, (off+n-1)/lineSize) {
		return nil
	}
	return tx.materialize()
}

// materialize turns the deferred lines into logged ones: it saves them,
// fences, and does the deferred stores.
func (tx *Tx) materialize() error {
	if len(tx.deferred) == 0 {
		return nil
	}
	h := tx.h
	tx.reserve = 0
	var ls []uint64
	for l, k := range tx.lines {
		if k == lineDeferred {
			ls = append(ls, l)
		}
	}
	slices.Sort(ls)
	for i := 0; i < len(ls); {
		j := i + 1
		for j < len(ls) && ls[j] == ls[j-1]+1 {
			j++
		}
		if err := tx.logRange(ls[i]*lineSize, uint64(j-i)*lineSize); err != nil {
			return err
		}
		i = j
	}
	for _, l := range ls {
		tx.mark(l, lineLogged)
	}
	h.mem.Fence()
	tx.unfenced = false
	for _, d := range tx.deferred {
		copy(h.b[d.off:d.off+d.n], tx.deferBuf[d.buf:d.buf+d.n])
	}
	tx.deferred, tx.deferBuf = tx.deferred[:0], tx.deferBuf[:0]
	return nil
}

// overlayDeferred copies the deferred stores that fall in [off,
// off+len(dst)) onto dst, in order.
func (tx *Tx) overlayDeferred(dst []byte, off uint64) {
	end := off + uint64(len(dst))
	for _, d := range tx.deferred {
		lo, hi := max(d.off, off), min(d.off+d.n, end)
		if lo < hi {
			copy(dst[lo-off:hi-off], tx.deferBuf[d.buf+lo-d.off:])
		}
	}
}

// applyDeferred does the deferred stores after the commit fence and
// flushes them without a fence (see the protocol).
func (tx *Tx) applyDeferred() {
	h := tx.h
	h.unfenced = h.unfenced[:0]
	for _, d := range tx.deferred {
		for l := d.off / lineSize; l <= (d.off+d.n-1)/lineSize; l++ {
			h.unfenced = append(h.unfenced, l)
		}
		copy(h.b[d.off:d.off+d.n], tx.deferBuf[d.buf:d.buf+d.n])
		if breakProtocol != "deferred-unflushed" {
			h.mem.Flush(int(d.off), int(d.n))
		}
	}
	tx.deferred, tx.deferBuf = tx.deferred[:0], tx.deferBuf[:0]
}

// sync makes the entries saved since the last sync durable.
func (tx *Tx) sync() {
	if tx.unfenced && breakProtocol != "undo-unfenced" {
		tx.h.mem.Fence()
		tx.unfenced = false
	}
}

// logRange appends an undo entry saving [off, off+n) and flushes it; the
// caller fences. It keeps room for the deferred lines' entries and a
// commit record.
func (tx *Tx) logRange(off, n uint64) error {
	h := tx.h
	if tx.logTail+entHeaderSize+n+tx.reserve+minRecord > tx.logEnd {
		return tx.fail(fmt.Errorf("pheap: %w: saving %d more bytes, a transaction's log holds %d", ErrLogFull, n, tx.logEnd-tx.logTail))
	}
	pos := tx.logTail
	e := h.b[pos : pos+entHeaderSize+n]
	copy(e[entHeaderSize:], h.b[off:off+n])
	tx.putHeader(e, off)
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
			tx.mark(l, lineFresh)
		}
	}
}

// sortedLines returns the lines in the map in order, for flushing in runs,
// and sets tx.kinds to their kinds.
func (tx *Tx) sortedLines() []uint64 {
	ls := append(tx.sorted[:0], tx.order...)
	slices.Sort(ls)
	ks := tx.kinds[:0]
	for _, l := range ls {
		ks = append(ks, tx.lines[l])
	}
	tx.sorted, tx.kinds = ls, ks
	return ls
}

// flushLines flushes the given sorted lines, coalescing neighbours;
// deferred lines, whose stores are not done yet, only if withDeferred.
// Carried lines were flushed by the last commit already and are skipped.
func (h *Heap) flushLines(ls []uint64, kinds []uint8, withDeferred bool) {
	skip := func(k uint8) bool { return k == lineCarried || (!withDeferred && k == lineDeferred) }
	for i := 0; i < len(ls); {
		if skip(kinds[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(ls) && ls[j] == ls[j-1]+1 && !skip(kinds[j]) {
			j++
		}
		h.mem.Flush(int(ls[i]*lineSize), int(uint64(j-i)*lineSize))
		i = j
	}
}

// rollback restores every saved range, newest first, and every covered
// line from the last commit record, and makes that durable, exactly as
// recovery would after a crash. Deferred stores are simply dropped. The
// next attempt keeps the generation, with a new nonce.
func (tx *Tx) rollback() {
	h := tx.h
	h.bins.valid = false // the heads come back from the log
	tx.deferred, tx.deferBuf, tx.reserve = tx.deferred[:0], tx.deferBuf[:0], 0
	wrote := false
	for i := len(tx.ents) - 1; i >= 0; i-- {
		e := tx.ents[i]
		copy(h.b[e.off:e.off+e.n], h.b[e.dataStart:e.dataStart+e.n])
		h.mem.Flush(int(e.off), int(e.n))
		wrote = true
	}
	for l, k := range tx.lines {
		if k == lineCovered {
			h.restoreCovered(l)
			wrote = true
		}
	}
	if wrote {
		h.mem.Fence()
	}
}
