package pheap

import "testing"

// The costs of the allocator and of the header checksums in process memory
// (no flush, no fence), for comparisons across versions of the format:
//
//	go test ./pheap -run '^$' -bench 'AllocFree|ObjectGet' -benchtime 300000x -count 6
//
// docs/BENCHMARKS.md has format 2's figures beside format 3's.

type benchVal struct{ V [64]byte }

// BenchmarkAllocFree: a transaction allocating a 64-byte object, pointing
// a root at it and freeing the one before (a free block reused, a block
// given back to Top, in turn).
func BenchmarkAllocFree(b *testing.B) {
	h, err := CreateMemory(volatileMem(make([]byte, 8<<20)))
	if err != nil {
		b.Fatal(err)
	}
	root, err := Root[Ptr[benchVal]](h, "r")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		err := h.Update(func(tx *Tx) error {
			old := root.Get(tx)
			p, err := New[benchVal](tx)
			if err != nil {
				return err
			}
			if err := root.Set(tx, p); err != nil {
				return err
			}
			return tx.Free(old)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObjectGet: a View reading a 64-byte root object (its header
// checked, checksum included).
func BenchmarkObjectGet(b *testing.B) {
	h, err := CreateMemory(volatileMem(make([]byte, 8<<20)))
	if err != nil {
		b.Fatal(err)
	}
	root, err := Root[benchVal](h, "r")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		h.View(func(tx *ViewTx) error { _ = root.Get(tx); return nil })
	}
}
