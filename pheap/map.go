package pheap

import (
	"bytes"
	"fmt"
	"iter"
	"math/rand/v2"
	"reflect"
	"unsafe"
)

// Map is a persistent hash map from K to V. The Map value is a handle (the
// offset of the map's header object) that can be stored in heap objects; it
// stays the same as the map grows.
//
// K and V must be pointer-free. Keys compare by their bytes, so a key type
// with padding bytes is refused, and float keys compare bitwise (NaN finds
// itself, -0 differs from +0). When K is String or Bytes, keys compare by
// content and the map keeps its own copy of each key: Put copies a new key
// (the caller keeps ownership of the one passed) and Delete frees the copy.
// GetString, PutString and DeleteString take a Go string for such maps.
//
// It is an open-addressing table with linear probing and backward-shift
// deletion, at most 3/4 full; growing doubles it. Changing a map while
// iterating over it is not allowed.
type Map[K, V any] struct {
	off uint64
}

// mapHdr is the map's header object.
type mapHdr struct {
	Count uint64 // entries
	Cap   uint64 // slots, a power of two (0 before the first Put)
	Slots uint64 // offset of the slot block
	Seed  uint64 // hash seed
}

// mapSlot is one table slot. Hash is 0 for an empty slot; otherwise the
// key's hash with the top bit set.
type mapSlot[K, V any] struct {
	Hash uint64
	Key  K
	Val  V
}

const (
	keyPlain = iota
	keyString
	keyBytes
	usedBit = 1 << 63
)

func mapKind[K any]() int {
	switch reflect.TypeFor[K]() {
	case reflect.TypeFor[String]():
		return keyString
	case reflect.TypeFor[Bytes]():
		return keyBytes
	}
	return keyPlain
}

func mapTags[K, V any]() (hdrTag, slotTag uint32) {
	ti := infoOf[mapSlot[K, V]]()
	return tagOf(ti.fp ^ 0x6d61702068647221), sliceTag(ti)
}

func checkMapTypes[K, V any]() error {
	if err := infoOf[K]().err; err != nil {
		return err
	}
	if err := infoOf[V]().err; err != nil {
		return err
	}
	if ti := infoOf[K](); mapKind[K]() == keyPlain && ti.padded {
		return fmt.Errorf("pheap: map key type %v has padding bytes, whose content is undefined: %w", ti.t, ErrNotPointerFree)
	}
	return nil
}

// NewMap allocates an empty map.
func NewMap[K, V any](tx *Tx) (Map[K, V], error) {
	if err := checkMapTypes[K, V](); err != nil {
		return Map[K, V]{}, tx.fail(err)
	}
	ht, _ := mapTags[K, V]()
	off, err := tx.alloc(uint64(unsafe.Sizeof(mapHdr{})), ht, nil)
	if err != nil {
		return Map[K, V]{}, err
	}
	le.PutUint64(tx.h.b[off+24:], rand.Uint64()) // Seed; fresh block
	return Map[K, V]{off}, nil
}

// Offset returns the offset of the map's header; 0 for a nil map.
func (m Map[K, V]) Offset() uint64 { return m.off }

// IsNil reports whether m was never made with NewMap.
func (m Map[K, V]) IsNil() bool { return m.off == 0 }

// table is a checked view of the map for one operation.
type table[K, V any] struct {
	h     *Heap
	hdr   *mapHdr
	slots []mapSlot[K, V]
	kind  int
}

func (m Map[K, V]) table(h *Heap) (*table[K, V], error) {
	if err := checkMapTypes[K, V](); err != nil {
		return nil, err
	}
	if m.off == 0 {
		// Reads of a nil map see an empty one, as in Go.
		return &table[K, V]{h: h, hdr: &mapHdr{}, kind: mapKind[K]()}, nil
	}
	ht, st := mapTags[K, V]()
	hb, _, err := h.object(m.off, uint64(unsafe.Sizeof(mapHdr{})), ht)
	if err != nil {
		return nil, fmt.Errorf("pheap: map: %w", err)
	}
	t := &table[K, V]{h: h, hdr: (*mapHdr)(unsafe.Pointer(&hb[0])), kind: mapKind[K]()}
	if err := t.load(st); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *table[K, V]) load(slotTag uint32) error {
	hd := t.hdr
	if hd.Cap == 0 {
		if hd.Count != 0 || hd.Slots != 0 {
			return fmt.Errorf("pheap: map: %w: %d entries without slots", ErrCorrupt, hd.Count)
		}
		t.slots = nil
		return nil
	}
	size := uint64(unsafe.Sizeof(mapSlot[K, V]{}))
	if hd.Cap&(hd.Cap-1) != 0 || hd.Cap > t.h.sb.Size/size || hd.Count > hd.Cap {
		return fmt.Errorf("pheap: map: %w: %d entries in %d slots", ErrCorrupt, hd.Count, hd.Cap)
	}
	b, _, err := t.h.object(hd.Slots, hd.Cap*size, slotTag)
	if err != nil {
		return fmt.Errorf("pheap: map slots: %w", err)
	}
	t.slots = unsafe.Slice((*mapSlot[K, V])(unsafe.Pointer(&b[0])), hd.Cap)
	return nil
}

// keyBytes returns the bytes a key compares by.
func (t *table[K, V]) keyBytes(k *K) ([]byte, error) {
	switch t.kind {
	case keyString:
		s := (*String)(unsafe.Pointer(k))
		return rawBytes(t.h, s.off, s.len)
	case keyBytes:
		b := (*Bytes)(unsafe.Pointer(k))
		return rawBytes(t.h, b.off, b.len)
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(k)), unsafe.Sizeof(*k)), nil
}

func (t *table[K, V]) hash(kb []byte) uint64 {
	// FNV-1a, seeded, then a murmur finalizer: stable across runs and
	// versions, which Go's maphash does not promise.
	x := uint64(14695981039346656037) ^ t.hdr.Seed
	for _, c := range kb {
		x ^= uint64(c)
		x *= 1099511628211
	}
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x | usedBit
}

// find returns the slot holding kb, or the empty slot where it would go.
func (t *table[K, V]) find(kb []byte, hash uint64) (int, bool, error) {
	if len(t.slots) == 0 {
		return -1, false, nil
	}
	mask := uint64(len(t.slots) - 1)
	for i, n := hash&mask, 0; n < len(t.slots); i, n = (i+1)&mask, n+1 {
		s := &t.slots[i]
		if s.Hash == 0 {
			return int(i), false, nil
		}
		if s.Hash != hash {
			continue
		}
		sb, err := t.keyBytes(&s.Key)
		if err != nil {
			return 0, false, err
		}
		if bytes.Equal(sb, kb) {
			return int(i), true, nil
		}
	}
	return -1, false, nil
}

func (t *table[K, V]) lookup(kb []byte) (V, bool, error) {
	var zero V
	i, ok, err := t.find(kb, t.hash(kb))
	if err != nil || !ok {
		return zero, false, err
	}
	return t.slots[i].Val, true, nil
}

// Len returns the number of entries. It panics on a corrupt map.
func (m Map[K, V]) Len(r Reader) int {
	t, err := m.table(r.heap())
	if err != nil {
		panic(err)
	}
	return int(t.hdr.Count)
}

// Objects returns the number of heap objects the map owns: its header, its
// slot table and, for String and Bytes keys, its copies of the keys. With
// the objects its values refer to, a caller can account for every live
// object (ViewTx.Check counts them) and so find leaks. 0 for a nil map.
func (m Map[K, V]) Objects(r Reader) (int, error) {
	if m.off == 0 {
		return 0, nil
	}
	t, err := m.table(r.heap())
	if err != nil {
		return 0, err
	}
	n := 1
	if t.hdr.Slots != 0 {
		n++
	}
	if t.kind == keyPlain {
		return n, nil
	}
	for i := range t.slots {
		// String and Bytes share their layout: the offset comes first.
		if s := &t.slots[i]; s.Hash != 0 && (*String)(unsafe.Pointer(&s.Key)).off != 0 {
			n++
		}
	}
	return n, nil
}

// Get returns the value for k and whether it is present. It panics on a
// corrupt map (see Lookup).
func (m Map[K, V]) Get(r Reader, k K) (V, bool) {
	v, ok, err := m.Lookup(r, k)
	if err != nil {
		panic(err)
	}
	return v, ok
}

// Lookup is Get returning corruption as an error.
func (m Map[K, V]) Lookup(r Reader, k K) (V, bool, error) {
	var zero V
	t, err := m.table(r.heap())
	if err != nil {
		return zero, false, err
	}
	kb, err := t.keyBytes(&k)
	if err != nil {
		return zero, false, err
	}
	return t.lookup(kb)
}

// GetString looks up a String- or Bytes-keyed map by a Go string. It
// panics on a corrupt map, a stored key whose bytes fail their checksum
// among them (see LookupString).
func (m Map[K, V]) GetString(r Reader, key string) (V, bool) {
	v, ok, err := m.LookupString(r, key)
	if err != nil {
		panic(err)
	}
	return v, ok
}

// LookupString is GetString returning corruption as an error: a damaged
// map, or a stored key that the lookup compares with key and whose bytes
// do not match their checksum (ErrChecksum). It panics only if the map is
// not keyed by String or Bytes, a mistake of the program, not of the heap.
func (m Map[K, V]) LookupString(r Reader, key string) (V, bool, error) {
	var zero V
	t, err := m.table(r.heap())
	if err != nil {
		return zero, false, err
	}
	if t.kind == keyPlain {
		panic(fmt.Sprintf("pheap: LookupString on a map keyed by %v", reflect.TypeFor[K]()))
	}
	return t.lookup([]byte(key))
}

// Put sets the value for k.
func (m Map[K, V]) Put(tx *Tx, k K, v V) error {
	t, err := m.table(tx.heap())
	if err != nil {
		return tx.fail(err)
	}
	kb, err := t.keyBytes(&k)
	if err != nil {
		return tx.fail(err)
	}
	return m.put(tx, t, append([]byte(nil), kb...), v)
}

// PutString sets the value for key in a String- or Bytes-keyed map.
func (m Map[K, V]) PutString(tx *Tx, key string, v V) error {
	t, err := m.table(tx.heap())
	if err != nil {
		return tx.fail(err)
	}
	if t.kind == keyPlain {
		return tx.fail(fmt.Errorf("pheap: PutString on a map keyed by %v", reflect.TypeFor[K]()))
	}
	return m.put(tx, t, []byte(key), v)
}

func (m Map[K, V]) put(tx *Tx, t *table[K, V], kb []byte, v V) error {
	if m.off == 0 {
		return tx.fail(fmt.Errorf("pheap: Put on a nil map (make it with NewMap): %w", ErrBadPtr))
	}
	hash := t.hash(kb)
	i, ok, err := t.find(kb, hash)
	if err != nil {
		return tx.fail(err)
	}
	size := uint64(unsafe.Sizeof(mapSlot[K, V]{}))
	if ok {
		s := &t.slots[i]
		voff := uint64(uintptr(unsafe.Pointer(&s.Val)) - uintptr(unsafe.Pointer(&t.h.b[0])))
		return tx.writeLater(voff, unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v)))
	}
	if (t.hdr.Count+1)*4 > t.hdr.Cap*3 {
		if err := m.grow(tx, t); err != nil {
			return err
		}
		if i, _, err = t.find(kb, hash); err != nil {
			return tx.fail(err)
		}
	}
	if i < 0 {
		// Count said there was room, yet every slot is taken.
		return tx.fail(fmt.Errorf("pheap: map: %w: no free slot among %d with %d entries", ErrCorrupt, len(t.slots), t.hdr.Count))
	}
	var key K
	switch t.kind {
	case keyString:
		s, err := NewString(tx, string(kb))
		if err != nil {
			return err
		}
		*(*String)(unsafe.Pointer(&key)) = s
	case keyBytes:
		b, err := NewBytes(tx, kb)
		if err != nil {
			return err
		}
		*(*Bytes)(unsafe.Pointer(&key)) = b
	default:
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&key)), unsafe.Sizeof(key)), kb)
	}
	// Count is the header's first field. The slot is stored after the
	// commit fence when saving it would cost a fence of its own: nothing
	// reads it in this transaction without going through h.object, which
	// stores it first.
	if err := tx.prepare(m.off, 8); err != nil {
		return err
	}
	t.hdr.Count++
	slot := mapSlot[K, V]{Hash: hash, Key: key, Val: v}
	return tx.writeLater(t.hdr.Slots+uint64(i)*size, unsafe.Slice((*byte)(unsafe.Pointer(&slot)), size))
}

func (m Map[K, V]) setCount(tx *Tx, t *table[K, V], n uint64) error {
	if err := tx.prepare(m.off, 8); err != nil { // Count is the first field
		return err
	}
	t.hdr.Count = n
	return nil
}

// grow moves the entries to a table twice the size, allocated in this
// transaction, so filling it needs no undo logging.
func (m Map[K, V]) grow(tx *Tx, t *table[K, V]) error {
	newCap := max(2*t.hdr.Cap, 8)
	size := uint64(unsafe.Sizeof(mapSlot[K, V]{}))
	_, st := mapTags[K, V]()
	off, err := tx.alloc(newCap*size, st, nil)
	if err != nil {
		return err
	}
	ns := unsafe.Slice((*mapSlot[K, V])(unsafe.Pointer(&t.h.b[off])), newCap)
	mask := newCap - 1
	for _, s := range t.slots {
		if s.Hash == 0 {
			continue
		}
		i := s.Hash & mask
		for ns[i].Hash != 0 {
			i = (i + 1) & mask
		}
		ns[i] = s
	}
	if t.hdr.Slots != 0 {
		if err := tx.free(t.hdr.Slots); err != nil {
			return err
		}
	}
	if err := tx.prepare(m.off, uint64(unsafe.Sizeof(mapHdr{}))); err != nil {
		return err
	}
	t.hdr.Cap, t.hdr.Slots = newCap, off
	t.slots = ns
	return nil
}

// Delete removes k and reports whether it was present.
func (m Map[K, V]) Delete(tx *Tx, k K) (bool, error) {
	t, err := m.table(tx.heap())
	if err != nil {
		return false, tx.fail(err)
	}
	kb, err := t.keyBytes(&k)
	if err != nil {
		return false, tx.fail(err)
	}
	return m.delete(tx, t, append([]byte(nil), kb...))
}

// DeleteString removes key from a String- or Bytes-keyed map.
func (m Map[K, V]) DeleteString(tx *Tx, key string) (bool, error) {
	t, err := m.table(tx.heap())
	if err != nil {
		return false, tx.fail(err)
	}
	if t.kind == keyPlain {
		return false, tx.fail(fmt.Errorf("pheap: DeleteString on a map keyed by %v", reflect.TypeFor[K]()))
	}
	return m.delete(tx, t, []byte(key))
}

func (m Map[K, V]) delete(tx *Tx, t *table[K, V], kb []byte) (bool, error) {
	if m.off == 0 {
		return false, nil
	}
	i, ok, err := t.find(kb, t.hash(kb))
	if err != nil {
		return false, tx.fail(err)
	}
	if !ok {
		return false, nil
	}
	if err := freeKey(tx, t.kind, &t.slots[i].Key); err != nil {
		return false, err
	}
	// Backward-shift deletion: pull later entries of the probe run into
	// the hole so lookups never need tombstones.
	size := uint64(unsafe.Sizeof(mapSlot[K, V]{}))
	mask := uint64(len(t.slots) - 1)
	hole := uint64(i)
	for j := (hole + 1) & mask; t.slots[j].Hash != 0; j = (j + 1) & mask {
		home := t.slots[j].Hash & mask
		// Move j into the hole unless its home lies cyclically in (hole, j].
		if (j-home)&mask < (j-hole)&mask {
			continue
		}
		if err := tx.prepare(t.hdr.Slots+hole*size, size); err != nil {
			return false, err
		}
		t.slots[hole] = t.slots[j]
		hole = j
	}
	if err := tx.prepare(t.hdr.Slots+hole*size, size); err != nil {
		return false, err
	}
	t.slots[hole] = mapSlot[K, V]{}
	return true, m.setCount(tx, t, t.hdr.Count-1)
}

func freeKey[K any](tx *Tx, kind int, k *K) error {
	switch kind {
	case keyString:
		return (*String)(unsafe.Pointer(k)).free(tx)
	case keyBytes:
		return (*Bytes)(unsafe.Pointer(k)).free(tx)
	}
	return nil
}

// All iterates over the entries in table order. It panics on a corrupt map.
func (m Map[K, V]) All(r Reader) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		t, err := m.table(r.heap())
		if err != nil {
			panic(err)
		}
		for _, s := range t.slots {
			if s.Hash != 0 && !yield(s.Key, s.Val) {
				return
			}
		}
	}
}

// free releases the map: its own key copies, its slots and its header.
func (m Map[K, V]) free(tx *Tx) error {
	if m.off == 0 {
		return nil
	}
	t, err := m.table(tx.heap())
	if err != nil {
		return tx.fail(err)
	}
	for i := range t.slots {
		if t.slots[i].Hash != 0 {
			if err := freeKey(tx, t.kind, &t.slots[i].Key); err != nil {
				return err
			}
		}
	}
	if t.hdr.Slots != 0 {
		if err := tx.free(t.hdr.Slots); err != nil {
			return err
		}
	}
	return tx.free(m.off)
}
