package pheap

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkOpen times open-to-first-read (Open, one map lookup, the value's
// bytes in hand) on heaps of 1 MiB and 1 GiB, each about half full of
// 4000-byte values as in bench/pheap; Close is outside the timed part. Open
// must cost the same for both. bench/pheap works on /dev/shm, so:
//
//	TMPDIR=/dev/shm go test ./pheap -run '^$' -bench Open -benchtime 300x
//
// (On a disk the msync of every filling transaction makes the 1 GiB fill
// take minutes.)
func BenchmarkOpen(b *testing.B) {
	for _, size := range []int64{1 << 20, 1 << 30} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			if size > 64<<20 && testing.Short() {
				b.Skip("fills a 1 GiB file")
			}
			path := filepath.Join(b.TempDir(), "open.heap")
			fillOpenBench(b, path, size)
			b.ResetTimer()
			for range b.N {
				h, err := Open(path)
				if err != nil {
					b.Fatal(err)
				}
				var v []byte
				err = h.View(func(tx *ViewTx) error {
					r, err := Root[openBenchRoot](tx, "bench")
					if err != nil {
						return err
					}
					val, ok := r.Get(tx).M.Get(tx, 0)
					if !ok {
						return fmt.Errorf("key 0 missing")
					}
					v = val.Get(tx)
					return nil
				})
				b.StopTimer()
				if err != nil || len(v) != 4000 {
					b.Fatalf("read %d bytes: %v", len(v), err)
				}
				if err := h.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

type openBenchRoot struct {
	M Map[uint64, Bytes]
}

// fillOpenBench creates a heap of size bytes at path holding size/2/4096
// values of 4000 bytes, written 64 to a transaction.
func fillOpenBench(b testing.TB, path string, size int64) {
	b.Helper()
	h, err := Create(path, size)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	root, err := Root[openBenchRoot](h, "bench")
	if err != nil {
		b.Fatal(err)
	}
	keys := int(size / 2 / 4096)
	val := make([]byte, 4000)
	for i := 0; i < keys; i += 64 {
		err := h.Update(func(tx *Tx) error {
			r, err := root.Modify(tx)
			if err != nil {
				return err
			}
			if r.M.IsNil() {
				if r.M, err = NewMap[uint64, Bytes](tx); err != nil {
					return err
				}
			}
			for k := i; k < min(i+64, keys); k++ {
				binary.LittleEndian.PutUint64(val, uint64(k))
				bs, err := NewBytes(tx, val)
				if err != nil {
					return err
				}
				if err := r.M.Put(tx, uint64(k), bs); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
