package main

import (
	"bufio"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nvboot/nvboot/pheap"
)

// The open-to-first-read workload: a store holding about half its size in
// 4000-byte values, closed, then opened again and one value read, timed
// from the open call to the value's bytes in hand. The heap is the
// production path (pheap.Create and pheap.Open on the file).
const openValueSize = 4000

type openRoot struct {
	M pheap.Map[uint64, pheap.Bytes]
}

func openValue(i int) []byte {
	v := make([]byte, openValueSize)
	binary.LittleEndian.PutUint64(v, uint64(i))
	return v
}

// openFiles are the three stores of one heap size.
type openFiles struct {
	heap, bolt, gob string
	keys            int
}

// fillOpen writes the same keys and values to a heap of size bytes, a bbolt
// database and a gob snapshot in dir.
func fillOpen(dir, tag string, size int64) (openFiles, error) {
	f := openFiles{
		heap: fmt.Sprintf("%s/open-%s.heap", dir, tag),
		bolt: fmt.Sprintf("%s/open-%s.bolt", dir, tag),
		gob:  fmt.Sprintf("%s/open-%s.gob", dir, tag),
		keys: int(size / 2 / 4096),
	}
	for _, p := range []string{f.heap, f.bolt, f.gob} {
		os.Remove(p)
	}
	h, err := pheap.Create(f.heap, size)
	if err != nil {
		return f, err
	}
	defer h.Close()
	root, err := pheap.Root[openRoot](h, "bench")
	if err != nil {
		return f, err
	}
	const batch = 64
	for i := 0; i < f.keys; i += batch {
		err := h.Update(func(tx *pheap.Tx) error {
			r, err := root.Modify(tx)
			if err != nil {
				return err
			}
			if r.M.IsNil() {
				if r.M, err = pheap.NewMap[uint64, pheap.Bytes](tx); err != nil {
					return err
				}
			}
			for k := i; k < min(i+batch, f.keys); k++ {
				b, err := pheap.NewBytes(tx, openValue(k))
				if err != nil {
					return err
				}
				if err := r.M.Put(tx, uint64(k), b); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return f, fmt.Errorf("filling %s: %w", f.heap, err)
		}
	}
	db, err := bolt.Open(f.bolt, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		return f, err
	}
	for i := 0; i < f.keys; i += 1000 {
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(boltBucket)
			if err != nil {
				return err
			}
			for k := i; k < min(i+1000, f.keys); k++ {
				if err := b.Put(binary.BigEndian.AppendUint64(nil, uint64(k)), openValue(k)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			db.Close()
			return f, fmt.Errorf("filling %s: %w", f.bolt, err)
		}
	}
	if err := db.Close(); err != nil {
		return f, err
	}
	snap := make(map[uint64][]byte, f.keys)
	for k := range f.keys {
		snap[uint64(k)] = openValue(k)
	}
	gf, err := os.Create(f.gob)
	if err != nil {
		return f, err
	}
	w := bufio.NewWriter(gf)
	if err := gob.NewEncoder(w).Encode(snap); err != nil {
		gf.Close()
		return f, fmt.Errorf("writing %s: %w", f.gob, err)
	}
	if err := w.Flush(); err != nil {
		gf.Close()
		return f, err
	}
	return f, gf.Close()
}

// checkValue makes sure the read found the right value.
func checkValue(what string, v []byte) error {
	if len(v) != openValueSize || binary.LittleEndian.Uint64(v) != 0 {
		return fmt.Errorf("%s: first read got %d bytes, not value 0", what, len(v))
	}
	return nil
}

func openPheap(path string) (time.Duration, error) {
	start := time.Now()
	h, err := pheap.Open(path)
	if err != nil {
		return 0, err
	}
	var v []byte
	err = h.View(func(tx *pheap.ViewTx) error {
		r, err := pheap.Root[openRoot](tx, "bench")
		if err != nil {
			return err
		}
		b, ok := r.Get(tx).M.Get(tx, 0)
		if !ok {
			return fmt.Errorf("key 0 missing")
		}
		v = b.Get(tx)
		return nil
	})
	d := time.Since(start)
	h.Close()
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	return d, checkValue(path, v)
}

func openBoltRead(path string) (time.Duration, error) {
	start := time.Now()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return 0, err
	}
	var v []byte
	err = db.View(func(tx *bolt.Tx) error {
		v = append(v, tx.Bucket(boltBucket).Get(binary.BigEndian.AppendUint64(nil, 0))...)
		return nil
	})
	d := time.Since(start)
	db.Close()
	if err != nil {
		return 0, err
	}
	return d, checkValue(path, v)
}

func openGob(path string) (time.Duration, error) {
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var snap map[uint64][]byte
	if err := gob.NewDecoder(bufio.NewReader(f)).Decode(&snap); err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	v := snap[0]
	d := time.Since(start)
	return d, checkValue(path, v)
}
