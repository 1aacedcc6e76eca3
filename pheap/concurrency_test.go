package pheap

import (
	"fmt"
	"sync"
	"testing"
)

// Readers run alongside a writer and always see a committed state: the
// two counters a transaction changes together are always equal, and the
// map holds exactly as many entries as they say; Stats reads the allocator
// beside them. Run with -race.
func TestConcurrentViewsSeeCommittedState(t *testing.T) {
	h, _ := newFileHeap(t)
	type pair struct {
		A, B uint64
		M    Map[uint64, uint64]
	}
	root, err := Root[pair](h, "pair")
	if err != nil {
		t.Fatal(err)
	}
	err = h.Update(func(tx *Tx) error {
		m, err := NewMap[uint64, uint64](tx)
		if err != nil {
			return err
		}
		return root.Set(tx, pair{M: m})
	})
	if err != nil {
		t.Fatal(err)
	}
	const writes = 300
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var a uint64
				err := h.View(func(tx *ViewTx) error {
					p := root.Get(tx)
					if p.A != p.B || uint64(p.M.Len(tx)) != p.A {
						return fmt.Errorf("torn read: A=%d B=%d len=%d", p.A, p.B, p.M.Len(tx))
					}
					a = p.A
					// Stats walks a bin's list: readers only, like kv's /stats.
					if st := tx.Stats(); st.LiveObjects < 2 {
						return fmt.Errorf("stats: %+v", st)
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
				if a == writes {
					return
				}
			}
		}()
	}
	for i := range writes {
		err := h.Update(func(tx *Tx) error {
			p, err := root.Modify(tx)
			if err != nil {
				return err
			}
			p.A++
			if err := p.M.Put(tx, uint64(i), uint64(i)); err != nil {
				return err
			}
			p.B++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
