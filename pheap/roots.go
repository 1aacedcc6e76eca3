package pheap

import (
	"bytes"
	"errors"
	"fmt"
)

// Source is where Root looks a root up: a *Heap (creating the root in a
// transaction of its own if needed), a *Tx (creating it in that
// transaction) or a *ViewTx (never creating it).
type Source interface {
	source() *Heap
}

func (h *Heap) source() *Heap   { return h }
func (v *ViewTx) source() *Heap { return v.heap() }

// Root returns the named root, a T that stays reachable under its name
// across runs. If there is none it is created zeroed, except from a ViewTx
// (ErrNoRoot). A root created with another type is ErrRootType: types are
// compared by layout (field kinds, sizes, offsets), not by name. Names are
// 1 to 32 bytes without NUL.
func Root[T any](src Source, name string) (Ptr[T], error) {
	ti := infoOf[T]()
	if ti.err != nil {
		return Ptr[T]{}, ti.err
	}
	if err := checkRootName(name); err != nil {
		return Ptr[T]{}, err
	}
	switch s := src.(type) {
	case *Heap:
		var p Ptr[T]
		err := s.View(func(v *ViewTx) (err error) {
			p, err = lookupRoot[T](v.h, name)
			return err
		})
		if !errors.Is(err, ErrNoRoot) {
			return p, err
		}
		err = s.Update(func(tx *Tx) (err error) {
			p, err = Root[T](tx, name)
			return err
		})
		return p, err
	case *Tx:
		p, err := lookupRoot[T](s.heap(), name)
		if !errors.Is(err, ErrNoRoot) {
			return p, err
		}
		return createRoot[T](s, name)
	default:
		return lookupRoot[T](src.source(), name)
	}
}

func checkRootName(name string) error {
	if name == "" || len(name) > rootNameMax || bytes.IndexByte([]byte(name), 0) >= 0 {
		return fmt.Errorf("pheap: root name %q: must be 1 to %d bytes without NUL", name, rootNameMax)
	}
	return nil
}

// findRoot returns the offset of the named root's entry, or of a free slot
// (and false), or 0 and false if neither exists.
func (h *Heap) findRoot(name string) (slot uint64, found bool) {
	free := uint64(0)
	for i := range h.sb.RootsCount {
		e := h.sb.RootsOff + i*rootEntrySize
		n := h.b[e+rootName : e+rootName+rootNameMax]
		if n[0] == 0 {
			if free == 0 {
				free = e
			}
			continue
		}
		if string(bytes.TrimRight(n, "\x00")) == name {
			return e, true
		}
	}
	return free, false
}

func lookupRoot[T any](h *Heap, name string) (Ptr[T], error) {
	e, ok := h.findRoot(name)
	if !ok {
		return Ptr[T]{}, fmt.Errorf("pheap: root %q: %w", name, ErrNoRoot)
	}
	if err := checkRootEntry(h.b[e:e+rootEntrySize], h.sb.ArenaOff, h.top()); err != nil {
		return Ptr[T]{}, fmt.Errorf("pheap: root %q: %w: %w", name, ErrCorrupt, err)
	}
	ti := infoOf[T]()
	if fp, sz := h.u64(e+rootType), h.u64(e+rootTypeSize); fp != ti.fp || sz != ti.size {
		return Ptr[T]{}, fmt.Errorf("pheap: root %q: %w: stored type has layout %#x and %d bytes, %v has %#x and %d",
			name, ErrRootType, fp, sz, ti.t, ti.fp, ti.size)
	}
	return Ptr[T]{h.u64(e + rootPtr)}, nil
}

func createRoot[T any](tx *Tx, name string) (Ptr[T], error) {
	h := tx.h
	e, _ := h.findRoot(name)
	if e == 0 {
		return Ptr[T]{}, tx.fail(fmt.Errorf("pheap: root %q: %w (%d roots)", name, ErrRootsFull, h.sb.RootsCount))
	}
	p, err := New[T](tx)
	if err != nil {
		return Ptr[T]{}, err
	}
	ti := infoOf[T]()
	ent := make([]byte, rootEntrySize)
	copy(ent[rootName:], name)
	le.PutUint64(ent[rootPtr:], p.off)
	le.PutUint64(ent[rootType:], ti.fp)
	le.PutUint64(ent[rootTypeSize:], ti.size)
	le.PutUint32(ent[rootChecksum:], storedSum(ent[:rootChecksum]))
	return p, tx.Write(e, ent)
}

// DeleteRoot removes the named root and frees its object (not what the
// object refers to). A missing root is ErrNoRoot.
func (tx *Tx) DeleteRoot(name string) error {
	h := tx.heap()
	e, ok := h.findRoot(name)
	if !ok {
		return fmt.Errorf("pheap: root %q: %w", name, ErrNoRoot)
	}
	p := h.u64(e + rootPtr)
	if err := tx.Write(e, make([]byte, rootEntrySize)); err != nil {
		return err
	}
	return tx.free(p)
}

// Roots returns the names of all roots.
func (v *ViewTx) Roots() []string {
	h := v.heap()
	var names []string
	for i := range h.sb.RootsCount {
		e := h.sb.RootsOff + i*rootEntrySize
		n := h.b[e+rootName : e+rootName+rootNameMax]
		if n[0] != 0 {
			names = append(names, string(bytes.TrimRight(n, "\x00")))
		}
	}
	return names
}

// checkRootEntry checks one root table entry against the allocated arena.
func checkRootEntry(e []byte, arenaOff, top uint64) error {
	name := e[rootName : rootName+rootNameMax]
	if name[0] == 0 {
		for _, c := range e {
			if c != 0 {
				return errors.New("free slot is not zero")
			}
		}
		return nil
	}
	if i := bytes.IndexByte(name, 0); i >= 0 && bytes.IndexFunc(name[i:], func(r rune) bool { return r != 0 }) >= 0 {
		return errors.New("name has bytes after its NUL padding")
	}
	if got, want := le.Uint32(e[rootChecksum:]), storedSum(e[:rootChecksum]); got != want {
		return fmt.Errorf("%w: stored %#08x, the entry gives %#08x", ErrChecksum, got, want)
	}
	p := le.Uint64(e[rootPtr:])
	if p < arenaOff+blockHeaderSize || p >= top || p%16 != 0 {
		return fmt.Errorf("object at %d outside the allocated arena", p)
	}
	if sz := le.Uint64(e[rootTypeSize:]); sz > top-p {
		return fmt.Errorf("object of %d bytes at %d overruns the arena", sz, p)
	}
	if le.Uint32(e[rootReserved:]) != 0 {
		return errors.New("reserved field not zero")
	}
	return nil
}
