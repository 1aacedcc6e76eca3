package pheap

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/pheap/crashsim"
)

// The collections workload exercises Map (growth, backward-shift deletes,
// String keys), Slice (append with moves) and String under crashes.
type collRoot struct {
	Nums  Map[uint64, uint64]
	Names Map[String, uint32]
	Log   Slice[uint64]
	Title String
}

type collModel struct {
	nums  map[uint64]uint64
	names map[string]uint32
	log   []uint64
	title string
}

func (m collModel) clone() collModel {
	return collModel{maps.Clone(m.nums), maps.Clone(m.names), slices.Clone(m.log), m.title}
}

func (m collModel) digest() string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m.nums)) {
		fmt.Fprintf(&sb, "%d=%d,", k, m.nums[k])
	}
	sb.WriteString("|")
	for _, k := range slices.Sorted(maps.Keys(m.names)) {
		fmt.Fprintf(&sb, "%s=%d,", k, m.names[k])
	}
	fmt.Fprintf(&sb, "|%v|%q", m.log, m.title)
	return sb.String()
}

func collWorkload(t testing.TB, h *Heap, n int, seed uint64, mark func(string)) []string {
	rng := rand.New(rand.NewPCG(seed, 2))
	root, err := Root[collRoot](h, "coll")
	if err != nil {
		t.Fatal(err)
	}
	err = h.Update(func(tx *Tx) error {
		r, err := root.Modify(tx)
		if err != nil {
			return err
		}
		if r.Nums, err = NewMap[uint64, uint64](tx); err != nil {
			return err
		}
		r.Names, err = NewMap[String, uint32](tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	mark("root")
	cur := collModel{nums: map[uint64]uint64{}, names: map[string]uint32{}}
	want := []string{cur.digest()}
	for i := range n {
		next := cur.clone()
		op := rng.IntN(10)
		err := h.Update(func(tx *Tx) error {
			r, err := root.Modify(tx)
			if err != nil {
				return err
			}
			switch {
			case op < 3: // several puts: growth happens inside a tx
				for range 1 + rng.IntN(6) {
					k, v := rng.Uint64N(120), rng.Uint64()
					if err := r.Nums.Put(tx, k, v); err != nil {
						return err
					}
					next.nums[k] = v
				}
			case op < 5: // deletes
				for range 1 + rng.IntN(4) {
					k := rng.Uint64N(120)
					if _, err := r.Nums.Delete(tx, k); err != nil {
						return err
					}
					delete(next.nums, k)
				}
			case op < 7: // string keys
				k := fmt.Sprintf("name-%d", rng.IntN(40))
				if rng.IntN(3) == 0 {
					if _, err := r.Names.DeleteString(tx, k); err != nil {
						return err
					}
					delete(next.names, k)
				} else {
					v := rng.Uint32()
					if err := r.Names.PutString(tx, k, v); err != nil {
						return err
					}
					next.names[k] = v
				}
			case op < 8: // append to the log, replace the title
				v := rng.Uint64()
				if r.Log, err = r.Log.Append(tx, v); err != nil {
					return err
				}
				next.log = append(next.log, v)
				if err := tx.Free(r.Title); err != nil {
					return err
				}
				title := strings.Repeat("t", rng.IntN(100))
				if r.Title, err = NewString(tx, title); err != nil {
					return err
				}
				next.title = title
			default: // abort after a mix of changes
				r.Nums.Put(tx, 1000, 1)
				r.Names.PutString(tx, "aborted", 1)
				r.Log.Append(tx, 1, 2, 3)
				next = cur.clone()
				return errAbort
			}
			return nil
		})
		if err != nil && !errors.Is(err, errAbort) {
			t.Fatalf("op %d: %v", i, err)
		}
		cur = next
		want = append(want, cur.digest())
		mark(fmt.Sprint("op ", i))
	}
	return want
}

// readColl reads the collections back, checking the allocator and that the
// allocated blocks are exactly those reachable from the root.
func readColl(h *Heap) (string, error) {
	var d string
	err := h.View(func(tx *ViewTx) error {
		root, st, ok, err := checkedRoot[collRoot](tx, "coll")
		if !ok {
			d = "no maps"
		}
		if !ok || err != nil {
			return err
		}
		r, err := root.Lookup(tx)
		if err != nil {
			return err
		}
		if r.Nums.IsNil() { // crashed before the maps were made
			d = "no maps"
			if st.LiveObjects != 1 {
				return fmt.Errorf("root without maps but %d live objects", st.LiveObjects)
			}
			return nil
		}
		reach := map[uint64]bool{}
		add := func(off uint64) error {
			if off == 0 {
				return nil
			}
			if reach[off] {
				return fmt.Errorf("block %d reachable twice", off)
			}
			reach[off] = true
			return nil
		}
		m := collModel{nums: map[uint64]uint64{}, names: map[string]uint32{}}
		add(root.Offset())
		for _, mp := range []uint64{r.Nums.Offset(), r.Names.Offset()} {
			add(mp)
			add(h.u64(mp + 16)) // mapHdr.Slots
		}
		for k, v := range r.Nums.All(tx) {
			m.nums[k] = v
		}
		if len(m.nums) != r.Nums.Len(tx) {
			return fmt.Errorf("nums: %d entries, count %d", len(m.nums), r.Nums.Len(tx))
		}
		for k, v := range r.Nums.All(tx) {
			if got, ok := r.Nums.Get(tx, k); !ok || got != v {
				return fmt.Errorf("nums: %d listed but Get gives %d, %v", k, got, ok)
			}
		}
		for k, v := range r.Names.All(tx) {
			if err := add(k.Offset()); err != nil {
				return err
			}
			m.names[k.Get(tx)] = v
			if got, ok := r.Names.GetString(tx, k.Get(tx)); !ok || got != v {
				return fmt.Errorf("names: %q listed but Get gives %d, %v", k.Get(tx), got, ok)
			}
		}
		add(r.Log.Offset())
		m.log = slices.Collect(func(yield func(uint64) bool) {
			for _, v := range r.Log.All(tx) {
				if !yield(v) {
					return
				}
			}
		})
		add(r.Title.Offset())
		m.title = r.Title.Get(tx)
		if int(st.LiveObjects) != len(reach) {
			return fmt.Errorf("leak: %d live blocks, %d reachable", st.LiveObjects, len(reach))
		}
		d = m.digest()
		return h.walkBlocks(func(blk, size uint64, state uint16) error {
			if state == blockAlloc && !reach[blk+blockHeaderSize] {
				return fmt.Errorf("leak: block %d (%d bytes) allocated but unreachable", blk, size)
			}
			return nil
		})
	})
	return d, err
}

func TestCrashCollections(t *testing.T) {
	ops, nestEvery, opt := crashOptions()
	rec := crashsim.New(garbage(128 << 10))
	h, err := CreateMemory(rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.Mark("created")
	want := collWorkload(t, h, ops, 9, rec.Mark)
	if got, err := readColl(h); err != nil || got != want[len(want)-1] {
		t.Fatalf("live heap after workload: %v, %v", got, err)
	}
	// Close ends the log with an empty generation while the last map
	// stores may still be on their way: crashes during it are checked too.
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	// Setting up the root and its maps takes two transactions before the
	// first workload mark: "no maps" stands for both not being done, and
	// the extra "created" mark keeps the expectations aligned.
	want = append([]string{"no maps"}, want...)
	if total := crashCheck(t, rec, opt, nestEvery, want, readColl); !testing.Short() && total < 10000 {
		t.Fatalf("only %d crash states, want at least 10000", total)
	}
}
