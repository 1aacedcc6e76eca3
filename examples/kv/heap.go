package main

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/nvboot/nvboot/pheap"
)

// heapStore is the default state: a persistent hash map from key to value
// in a pheap file. Nothing is loaded at start; the map is used in place.
// Each put or delete is one transaction, durable when Update returns.
type heapStore struct {
	h    *pheap.Heap
	root pheap.Ptr[kvRoot]
	path string
}

// kvRoot is the heap's "kv" root. The map owns its key copies; the values
// are Bytes objects the store allocates and frees.
type kvRoot struct {
	M pheap.Map[pheap.String, pheap.Bytes]
}

// openHeapStore opens the heap at path, or creates one of size bytes if
// there is no file.
func openHeapStore(path string, size int64) (*heapStore, error) {
	h, err := pheap.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		h, err = pheap.Create(path, size)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the state heap: %w", err)
	}
	s := &heapStore{h: h, path: path}
	err = h.Update(func(tx *pheap.Tx) error {
		r, err := pheap.Root[kvRoot](tx, "kv")
		if err != nil {
			return err
		}
		s.root = r
		if !r.Get(tx).M.IsNil() {
			return nil
		}
		m, err := pheap.NewMap[pheap.String, pheap.Bytes](tx)
		if err != nil {
			return err
		}
		return r.Set(tx, kvRoot{M: m})
	})
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("state heap %s: setting up the kv root: %w", path, err)
	}
	return s, nil
}

func (s *heapStore) kv(r pheap.Reader) pheap.Map[pheap.String, pheap.Bytes] {
	return s.root.Get(r).M
}

func (s *heapStore) Put(key string, val []byte) error {
	return s.h.Update(func(tx *pheap.Tx) error {
		m := s.kv(tx)
		old, had := m.GetString(tx, key)
		b, err := pheap.NewBytes(tx, val)
		if err != nil {
			return err
		}
		if err := m.PutString(tx, key, b); err != nil {
			return err
		}
		if had {
			return tx.Free(old)
		}
		return nil
	})
}

func (s *heapStore) Delete(key string) error {
	return s.h.Update(func(tx *pheap.Tx) error {
		m := s.kv(tx)
		old, had := m.GetString(tx, key)
		if !had {
			return errNotFound
		}
		if _, err := m.DeleteString(tx, key); err != nil {
			return err
		}
		return tx.Free(old)
	})
}

func (s *heapStore) Get(key string) (val []byte, err error) {
	err = s.h.View(func(tx *pheap.ViewTx) error {
		b, ok := s.kv(tx).GetString(tx, key)
		if !ok {
			return errNotFound
		}
		val = b.Get(tx)
		return nil
	})
	return val, err
}

func (s *heapStore) Keys(prefix string) (keys []string) {
	s.h.View(func(tx *pheap.ViewTx) error {
		for k := range s.kv(tx).All(tx) {
			if ks := k.Get(tx); strings.HasPrefix(ks, prefix) {
				keys = append(keys, ks)
			}
		}
		return nil
	})
	slices.Sort(keys)
	return keys
}

func (s *heapStore) Stats() map[string]any {
	out := map[string]any{"state": s.path, "mode": "pheap/" + s.h.Mode()}
	s.h.View(func(tx *pheap.ViewTx) error {
		st := tx.Stats()
		out["heap_size"] = st.Size
		out["heap_used"] = st.LiveBytes
		out["heap_objects"] = st.LiveObjects
		out["keys"] = s.kv(tx).Len(tx)
		return nil
	})
	return out
}

func (s *heapStore) Close() error { return s.h.Close() }
