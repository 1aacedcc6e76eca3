package main

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/nvboot/nvboot/pheap"
)

// heapStore is the default state: a persistent hash map from key to value
// in a pheap file. Nothing is loaded at start; the map is used in place.
// Each put or delete is one transaction, durable when Update returns.
type heapStore struct {
	h     *pheap.Heap
	root  pheap.Ptr[kvRoot]
	path  string
	check heapCheck
}

// heapCheck is what the full check at start (-check-on-open) found.
type heapCheck struct {
	ran       bool
	err       error
	took      time.Duration
	live      int64 // allocated objects, counted block by block
	reachable int64 // objects reachable from the kv root
}

// kvRoot is the heap's "kv" root. The map owns its key copies; the values
// are Bytes objects the store allocates and frees.
type kvRoot struct {
	M pheap.Map[pheap.String, pheap.Bytes]
}

// openHeapStore opens the heap at path, or creates one of size bytes if
// there is no file. With check it then runs checkHeap and keeps the result
// for Stats; a heap that fails the check is still served, so that the
// failure can be read in /stats.
func openHeapStore(path string, size int64, check bool) (*heapStore, error) {
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
	if check {
		s.check = s.checkHeap()
	}
	return s, nil
}

// checkHeap runs the heap's full consistency check (every block, every
// free list, the counters) and accounts for every live object: the kv
// root, the map's own objects and one per non-empty value. A live object
// nothing reaches is a leak. The check reads every block, so its time
// grows with the data (3 ms for a full 64 MiB heap on the development
// machine, warm): that is why it is a flag, off by default.
func (s *heapStore) checkHeap() heapCheck {
	c := heapCheck{ran: true}
	start := time.Now()
	c.err = s.h.View(func(tx *pheap.ViewTx) error {
		st, err := tx.Check()
		if err != nil {
			return err
		}
		c.live = st.LiveObjects
		if roots := tx.Roots(); len(roots) != 1 {
			return fmt.Errorf("roots %q, want only \"kv\": objects of others cannot be accounted for", roots)
		}
		m := s.kv(tx)
		n, err := m.Objects(tx)
		if err != nil {
			return err
		}
		c.reachable = 1 + int64(n)
		for _, v := range m.All(tx) {
			if v.Offset() != 0 {
				c.reachable++
			}
		}
		if c.reachable != c.live {
			return fmt.Errorf("%d live objects, %d reachable from the kv root: %d leaked", c.live, c.reachable, c.live-c.reachable)
		}
		return nil
	})
	c.took = time.Since(start)
	return c
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
	out["check"] = "off"
	if c := s.check; c.ran {
		out["check"] = "ok"
		if c.err != nil {
			out["check"] = c.err.Error()
		}
		out["check_ms"] = float64(c.took.Microseconds()) / 1000
		out["check_live_objects"] = c.live
		out["check_reachable_objects"] = c.reachable
	}
	return out
}

func (s *heapStore) Close() error { return s.h.Close() }
