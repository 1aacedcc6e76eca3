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

// checkHeap runs the heap's full consistency check (every block and its
// header checksum, every bin, the counters, every value's checksum) and
// accounts for every live object: the kv root, the map's own objects and
// one per non-empty value. A live object nothing reaches is a leak. The
// check reads every block, so its time grows with the data (on the
// development machine, warm: 5 ms for a 64 MiB heap full of 4000-byte
// values, 29 ms for one full of 390,000 small objects): that is why it is a
// flag, off by default.
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

// kvMap is kv returning a damaged root as an error.
func (s *heapStore) kvMap(r pheap.Reader) (pheap.Map[pheap.String, pheap.Bytes], error) {
	root, err := s.root.Lookup(r)
	if err != nil {
		return pheap.Map[pheap.String, pheap.Bytes]{}, fmt.Errorf("state heap %s: the kv root: %w", s.path, err)
	}
	return root.M, nil
}

// lookup finds key's value; a damaged map or stored key is an error
// naming the key.
func (s *heapStore) lookup(r pheap.Reader, key string) (pheap.Bytes, bool, error) {
	m, err := s.kvMap(r)
	if err != nil {
		return pheap.Bytes{}, false, err
	}
	b, ok, err := m.LookupString(r, key)
	if err != nil {
		return b, false, fmt.Errorf("key %q: looking it up in state heap %s: %w", key, s.path, err)
	}
	return b, ok, nil
}

func (s *heapStore) Put(key string, val []byte) error {
	return s.h.Update(func(tx *pheap.Tx) error {
		old, had, err := s.lookup(tx, key)
		if err != nil {
			return err
		}
		b, err := pheap.NewBytes(tx, val)
		if err != nil {
			return err
		}
		if err := s.kv(tx).PutString(tx, key, b); err != nil {
			return err
		}
		if had {
			// Also when the old value's bytes are damaged: the put
			// replaces them. Not when its block's header is: its size is
			// not known for sure, so the block cannot be freed.
			if err := tx.Free(old); err != nil {
				return fmt.Errorf("key %q: freeing its old value: %w", key, err)
			}
		}
		return nil
	})
}

func (s *heapStore) Delete(key string) error {
	return s.h.Update(func(tx *pheap.Tx) error {
		old, had, err := s.lookup(tx, key)
		if err != nil {
			return err
		}
		if !had {
			return errNotFound
		}
		if _, err := s.kv(tx).DeleteString(tx, key); err != nil {
			return err
		}
		if err := tx.Free(old); err != nil {
			return fmt.Errorf("key %q: freeing its value: %w", key, err)
		}
		return nil
	})
}

// Get returns key's value. Values carry a checksum that pheap verifies on
// the read: bytes that do not match it (a bit flipped on the media, a
// stray write) are errDamaged naming the key, never the value.
func (s *heapStore) Get(key string) (val []byte, err error) {
	err = s.h.View(func(tx *pheap.ViewTx) error {
		b, ok, err := s.lookup(tx, key)
		if err != nil {
			return err
		}
		if !ok {
			return errNotFound
		}
		if val, err = b.Lookup(tx); err != nil {
			return fmt.Errorf("key %q: %w: state heap %s: %w", key, errDamaged, s.path, err)
		}
		return nil
	})
	return val, err
}

// Keys lists the keys with the prefix. A stored key whose bytes fail
// their checksum cannot be named, nor compared with the prefix: it is
// left out, and counted in damaged.
func (s *heapStore) Keys(prefix string) (keys []string, damaged int, err error) {
	err = s.h.View(func(tx *pheap.ViewTx) error {
		var err error
		damaged, err = s.walk(tx, func(k string) {
			if strings.HasPrefix(k, prefix) {
				keys = append(keys, k)
			}
		})
		return err
	})
	slices.Sort(keys)
	return keys, damaged, err
}

// walk calls f with every stored key that reads and returns how many do
// not (their bytes fail their checksum, or their reference is bad); an
// error when the map itself is damaged.
func (s *heapStore) walk(r pheap.Reader, f func(key string)) (damaged int, err error) {
	m, err := s.kvMap(r)
	if err != nil {
		return 0, err
	}
	// All panics on a damaged map; Objects reads the same table and says
	// so as an error.
	if _, err := m.Objects(r); err != nil {
		return 0, fmt.Errorf("state heap %s: the key map: %w", s.path, err)
	}
	for k := range m.All(r) {
		if ks, err := k.Lookup(r); err != nil {
			damaged++
		} else {
			f(ks)
		}
	}
	return damaged, nil
}

// Stats reports the heap's use and what can still be allocated:
// heap_free (bytes, headers included, in free blocks and unused arena)
// and heap_largest_alloc (the largest object one allocation can take: a
// put needs its value's bytes there, and a key's elsewhere); keys counts
// the entries, keys_damaged those whose stored key fails its checksum
// (every key is read for it: the time grows with the keys), keys_error
// says why neither is known when the map itself is damaged.
func (s *heapStore) Stats() map[string]any {
	out := map[string]any{"state": s.path, "mode": "pheap/" + s.h.Mode()}
	s.h.View(func(tx *pheap.ViewTx) error {
		st := tx.Stats()
		out["heap_size"] = st.Size
		out["heap_arena"] = st.ArenaSize
		out["heap_used"] = st.LiveBytes
		out["heap_objects"] = st.LiveObjects
		out["heap_free"] = st.FreeBytes
		out["heap_largest_alloc"] = st.LargestAlloc
		// walk checks the map first: Len panics on a damaged one.
		if damaged, err := s.walk(tx, func(string) {}); err != nil {
			out["keys_error"] = err.Error()
		} else {
			out["keys"] = s.kv(tx).Len(tx)
			out["keys_damaged"] = damaged
		}
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
