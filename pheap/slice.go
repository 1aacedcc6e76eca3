package pheap

import (
	"fmt"
	"iter"
	"math"
	"unsafe"

	"github.com/nvboot/nvboot/internal/pheapchecksums"
)

// Slice is a persistent slice: a header (offset, length, capacity) that can
// be stored in heap objects, with the elements in one heap block. T must be
// pointer-free. Like a Go slice header it is a value: operations that change
// the length return a new header, which the caller stores.
type Slice[T any] struct {
	off, len, cap uint64
}

// String is a persistent immutable string: offset and length of its bytes.
type String struct {
	off, len uint64
}

// Bytes is a persistent byte string: offset and length.
type Bytes struct {
	off, len uint64
}

func sliceTag(ti *typeInfo) uint32 { return tagOf(ti.fp*0x9E3779B97F4A7C15 + 0x5eed) }

// MakeSlice allocates a zeroed slice of length n and capacity c (c >= n).
func MakeSlice[T any](tx *Tx, n, c int) (Slice[T], error) {
	ti := infoOf[T]()
	if ti.err != nil {
		return Slice[T]{}, tx.fail(ti.err)
	}
	if n < 0 || c < n {
		return Slice[T]{}, tx.fail(fmt.Errorf("pheap: MakeSlice(%d, %d): %w: bad length or capacity", n, c, ErrBadPtr))
	}
	if c == 0 {
		return Slice[T]{}, nil
	}
	if ti.size > 0 && uint64(c) > math.MaxUint64/ti.size {
		return Slice[T]{}, tx.fail(fmt.Errorf("pheap: MakeSlice of %d elements: %w", c, ErrNoSpace))
	}
	off, err := tx.alloc(uint64(c)*ti.size, sliceTag(ti), nil)
	return Slice[T]{off: off, len: uint64(n), cap: uint64(c)}, err
}

// Len returns the number of elements.
func (s Slice[T]) Len() int { return int(s.len) }

// Cap returns the capacity.
func (s Slice[T]) Cap() int { return int(s.cap) }

// Offset returns the offset of the element block; 0 if none.
func (s Slice[T]) Offset() uint64 { return s.off }

func (s Slice[T]) free(tx *Tx) error {
	if s.off == 0 {
		return nil
	}
	return tx.free(s.off)
}

// elems checks the block and returns the elements as a Go slice aliasing
// the heap.
func (s Slice[T]) elems(h *Heap) ([]T, error) {
	if s.off == 0 {
		if s.len != 0 || s.cap != 0 {
			return nil, fmt.Errorf("pheap: slice: %w: no block but length %d", ErrBadPtr, s.len)
		}
		return nil, nil
	}
	ti := infoOf[T]()
	if ti.err != nil {
		return nil, ti.err
	}
	if s.len > s.cap || (ti.size > 0 && s.cap > h.sb.Size/ti.size) {
		return nil, fmt.Errorf("pheap: slice at %d: %w: length %d, capacity %d", s.off, ErrBadPtr, s.len, s.cap)
	}
	b, _, err := h.object(s.off, s.cap*ti.size, sliceTag(ti))
	if err != nil {
		return nil, fmt.Errorf("pheap: slice: %w", err)
	}
	if ti.size == 0 {
		return make([]T, s.len), nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), s.cap)[:s.len:s.len], nil
}

// View returns the elements as a Go slice aliasing the heap, for reading
// without copies; valid until the transaction ends. It panics on a bad
// header, like an out-of-range index.
func (s Slice[T]) View(r Reader) []T {
	e, err := s.elems(r.heap())
	if err != nil {
		panic(err)
	}
	return e
}

// At returns element i. It panics if i is out of range.
func (s Slice[T]) At(r Reader, i int) T {
	return s.View(r)[i]
}

// All iterates over the index and value of every element.
func (s Slice[T]) All(r Reader) iter.Seq2[int, T] {
	return func(yield func(int, T) bool) {
		for i, v := range s.View(r) {
			if !yield(i, v) {
				return
			}
		}
	}
}

// Set stores v in element i.
func (s Slice[T]) Set(tx *Tx, i int, v T) error {
	e, err := s.elems(tx.heap())
	if err != nil {
		return tx.fail(err)
	}
	if i < 0 || i >= len(e) {
		return tx.fail(fmt.Errorf("pheap: slice index %d out of range [0:%d]: %w", i, len(e), ErrBadPtr))
	}
	size := infoOf[T]().size
	if err := tx.prepare(s.off+uint64(i)*size, size); err != nil {
		return err
	}
	e[i] = v
	return nil
}

// Append adds vs and returns the new header. When the capacity is exceeded
// the elements move to a new block twice as large and the old block is
// freed, so every other copy of the old header is invalid afterwards.
func (s Slice[T]) Append(tx *Tx, vs ...T) (Slice[T], error) {
	h := tx.heap()
	e, err := s.elems(h)
	if err != nil {
		return s, tx.fail(err)
	}
	need := s.len + uint64(len(vs))
	if need > s.cap {
		ns, err := MakeSlice[T](tx, int(s.len), int(max(2*s.cap, need, 4)))
		if err != nil {
			return s, err
		}
		ne, err := ns.elems(h)
		if err != nil {
			return s, tx.fail(err)
		}
		copy(ne, e) // fresh block: nothing to save
		if err := s.free(tx); err != nil {
			return s, err
		}
		s = ns
	}
	size := infoOf[T]().size
	if err := tx.prepare(s.off+s.len*size, uint64(len(vs))*size); err != nil {
		return s, err
	}
	s.len = need
	e, err = s.elems(h)
	if err != nil {
		return s, tx.fail(err)
	}
	copy(e[need-uint64(len(vs)):], vs)
	return s, nil
}

// rawBytes checks a String or Bytes block and returns its bytes: the block
// must be a live raw block holding exactly n bytes, whose checksum they
// match. So a bit flipped in the data, its header or the reference is an
// error here (ErrChecksum, ErrBadPtr), never other bytes.
func rawBytes(h *Heap, off, n uint64) ([]byte, error) {
	if off == 0 {
		if n != 0 {
			return nil, fmt.Errorf("pheap: bytes: %w: no block but length %d", ErrBadPtr, n)
		}
		return nil, nil
	}
	b, hd, err := h.object(off, n, 0)
	if err != nil {
		return nil, fmt.Errorf("pheap: bytes at %d: %w", off, err)
	}
	if held := hd.size - blockHeaderSize - uint64(hd.pad); held != n {
		return nil, fmt.Errorf("pheap: bytes at %d: %w: the reference says %d bytes, the block holds %d", off, ErrBadPtr, n, held)
	}
	if pheapchecksums.NoChecksums.Load() {
		return b, nil
	}
	if sum := storedSum(b); sum != hd.dataSum {
		return nil, fmt.Errorf("pheap: bytes at %d: %w: the %d bytes sum to %#08x, their block header says %#08x", off, ErrChecksum, n, sum, hd.dataSum)
	}
	return b, nil
}

// newRaw copies b into a new raw block with its checksum.
func newRaw(tx *Tx, b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return tx.alloc(uint64(len(b)), 0, b)
}

// NewString copies s into the heap.
func NewString(tx *Tx, s string) (String, error) {
	off, err := newRaw(tx, []byte(s))
	return String{off, uint64(len(s))}, err
}

// Len returns the length in bytes.
func (s String) Len() int { return int(s.len) }

// Offset returns the offset of the bytes; 0 for the empty string.
func (s String) Offset() uint64 { return s.off }

// Get returns the string. It panics on a bad header or on bytes that do
// not match their checksum (see Lookup).
func (s String) Get(r Reader) string {
	v, err := s.Lookup(r)
	if err != nil {
		panic(err)
	}
	return v
}

// Lookup is Get returning a bad reference or damaged bytes as an error:
// ErrChecksum when the bytes do not match the checksum stored with them,
// ErrBadPtr when the reference or the block's header is bad.
func (s String) Lookup(r Reader) (string, error) {
	b, err := rawBytes(r.heap(), s.off, s.len)
	return string(b), err
}

func (s String) free(tx *Tx) error {
	if s.off == 0 {
		return nil
	}
	return tx.free(s.off)
}

// NewBytes copies b into the heap. Bytes never change once written: their
// block keeps a checksum that every read verifies.
func NewBytes(tx *Tx, b []byte) (Bytes, error) {
	off, err := newRaw(tx, b)
	return Bytes{off, uint64(len(b))}, err
}

// Len returns the length in bytes.
func (b Bytes) Len() int { return int(b.len) }

// Offset returns the offset of the bytes; 0 when empty.
func (b Bytes) Offset() uint64 { return b.off }

// Get returns a copy of the bytes. It panics on a bad header or on bytes
// that do not match their checksum (see Lookup).
func (b Bytes) Get(r Reader) []byte {
	return append([]byte(nil), b.View(r)...)
}

// Lookup is Get returning a bad reference or damaged bytes as an error:
// ErrChecksum when the bytes do not match the checksum stored with them,
// ErrBadPtr when the reference or the block's header is bad.
func (b Bytes) Lookup(r Reader) ([]byte, error) {
	v, err := rawBytes(r.heap(), b.off, b.len)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), v...), nil
}

// View returns the bytes aliasing the heap, read-only, valid until the
// transaction ends. It panics like Get. The checksum is verified on every
// call: a caller reading the same bytes often keeps the slice.
func (b Bytes) View(r Reader) []byte {
	v, err := rawBytes(r.heap(), b.off, b.len)
	if err != nil {
		panic(err)
	}
	return v
}

func (b Bytes) free(tx *Tx) error {
	if b.off == 0 {
		return nil
	}
	return tx.free(b.off)
}
