package pheap

import (
	"fmt"
	"unsafe"
)

// Ptr is a reference to a T in the heap: the offset of the T from the start
// of the heap, 0 for nil. Offsets stay valid when the file is mapped at
// another address, and a Ptr is itself pointer-free, so it can be stored in
// heap objects. T must be pointer-free (see CheckType).
type Ptr[T any] struct {
	off uint64
}

// Ref is any reference that Tx.Free can release: Ptr, Slice, String, Bytes
// and Map.
type Ref interface {
	Offset() uint64
	free(tx *Tx) error
}

// Offset returns the offset of the object in the heap; 0 for nil.
func (p Ptr[T]) Offset() uint64 { return p.off }

// IsNil reports whether p refers to nothing.
func (p Ptr[T]) IsNil() bool { return p.off == 0 }

func (p Ptr[T]) String() string {
	var zero T
	return fmt.Sprintf("pheap.Ptr[%T](%d)", zero, p.off)
}

func (p Ptr[T]) free(tx *Tx) error {
	if p.off == 0 {
		return nil
	}
	return tx.free(p.off)
}

// New allocates a zeroed T in the heap. If the transaction rolls back, the
// allocation is undone with it.
func New[T any](tx *Tx) (Ptr[T], error) {
	ti := infoOf[T]()
	if ti.err != nil {
		return Ptr[T]{}, tx.fail(ti.err)
	}
	off, err := tx.alloc(ti.size, ti.tag, nil)
	return Ptr[T]{off}, err
}

// Free releases the object r refers to (a nil reference is a no-op). For a
// Map it releases the map's storage too; objects that r's object refers to
// are not freed.
func (tx *Tx) Free(r Ref) error {
	return r.free(tx)
}

// deref checks p and returns a Go pointer to the T it refers to.
func deref[T any](h *Heap, p Ptr[T]) (*T, error) {
	return derefInfo(h, p, infoOf[T]())
}

// derefInfo is deref for a caller that already has T's typeInfo.
func derefInfo[T any](h *Heap, p Ptr[T], ti *typeInfo) (*T, error) {
	if ti.err != nil {
		return nil, ti.err
	}
	if p.off == 0 {
		return nil, fmt.Errorf("pheap: %v: %w: nil", p, ErrBadPtr)
	}
	b, _, err := h.object(p.off, ti.size, ti.tag)
	if err != nil {
		return nil, fmt.Errorf("pheap: %v: %w", p, err)
	}
	if ti.size == 0 {
		return new(T), nil
	}
	return (*T)(unsafe.Pointer(&b[0])), nil
}

// Get returns a copy of the T that p refers to. It panics if p is nil or
// does not refer to a live T, as dereferencing a bad Go pointer would.
func (p Ptr[T]) Get(r Reader) T {
	v, err := deref(r.heap(), p)
	if err != nil {
		panic(err)
	}
	return *v
}

// Ref returns a Go pointer to the T that p refers to, for reading without a
// copy. It is valid until the transaction ends; writing through it from a
// ViewTx, or without Modify, bypasses the undo log and is not crash safe.
func (p Ptr[T]) Ref(r Reader) *T {
	v, err := deref(r.heap(), p)
	if err != nil {
		panic(err)
	}
	return v
}

// Lookup is Get with an error instead of a panic, for references that come
// from outside the program's own invariants.
func (p Ptr[T]) Lookup(r Reader) (T, error) {
	v, err := deref(r.heap(), p)
	if err != nil {
		var zero T
		return zero, err
	}
	return *v, nil
}

// Set stores v in the T that p refers to, saving the old value first.
func (p Ptr[T]) Set(tx *Tx, v T) error {
	dst, err := p.Modify(tx)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// Modify saves the T that p refers to in the undo log and returns a Go
// pointer to it for changing in place (PMDK's TX_ADD). The pointer is valid
// until the transaction ends; the changes commit or roll back with it.
func (p Ptr[T]) Modify(tx *Tx) (*T, error) {
	h := tx.heap()
	if tx.err != nil {
		return nil, tx.err
	}
	ti := infoOf[T]()
	v, err := derefInfo(h, p, ti)
	if err != nil {
		return nil, tx.fail(err)
	}
	if err := tx.prepare(p.off, ti.size); err != nil {
		return nil, err
	}
	return v, nil
}
