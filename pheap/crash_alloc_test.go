package pheap

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/pheap/crashsim"
)

// The allocator workload keeps values of mixed sizes (48 bytes to 3 KiB of
// block) in a fixed set of slots and replaces, frees and allocates them a
// few at a time, so that blocks are split, merged with the block before,
// after or both, given back to Top and taken from it, inside one
// transaction and across transactions, some of them rolled back.
const allocSlots = 24

type allocRoot struct {
	Vals  [allocSlots]Bytes
	Seeds [allocSlots]uint64 // what each value was made from (allocVal)
}

// allocVal is the content of a value: n bytes from seed.
func allocVal(n int, seed uint64) []byte {
	b := make([]byte, n)
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// allocSize draws a value size: mostly small, some of a few hundred bytes,
// some of kilobytes, so freed blocks rarely fit the next request exactly.
func allocSize(rng *rand.Rand) int {
	switch r := rng.IntN(10); {
	case r < 5:
		return 1 + rng.IntN(100)
	case r < 8:
		return 100 + rng.IntN(900)
	default:
		return 1000 + rng.IntN(2000)
	}
}

// allocModel is the slots' expected content: length and seed, 0 = empty.
type allocModel [allocSlots][2]uint64

func (m allocModel) digest() string {
	var sb strings.Builder
	for i, v := range m {
		if v[0] != 0 {
			fmt.Fprintf(&sb, "%d:%d/%d,", i, v[0], v[1])
		}
	}
	return sb.String()
}

// allocWorkload runs n transactions of one to four slot operations each
// and returns the digest after each (the first: the empty slots).
func allocWorkload(t testing.TB, h *Heap, n int, seed uint64, mark func(string)) []string {
	rng := rand.New(rand.NewPCG(seed, 3))
	root, err := Root[allocRoot](h, "alloc")
	if err != nil {
		t.Fatal(err)
	}
	mark("root")
	var cur allocModel
	want := []string{cur.digest()}
	for i := range n {
		next := cur
		abort := rng.IntN(8) == 0
		ops := 1 + rng.IntN(4)
		err := h.Update(func(tx *Tx) error {
			r, err := root.Modify(tx)
			if err != nil {
				return err
			}
			for k := range ops {
				s := rng.IntN(allocSlots)
				if err := tx.Free(r.Vals[s]); err != nil {
					return err
				}
				r.Vals[s], r.Seeds[s], next[s] = Bytes{}, 0, [2]uint64{}
				if rng.IntN(4) == 0 {
					continue // a free only
				}
				size, vs := allocSize(rng), uint64(i)<<8|uint64(k)
				if r.Vals[s], err = NewBytes(tx, allocVal(size, vs)); err != nil {
					return err
				}
				r.Seeds[s], next[s] = vs, [2]uint64{uint64(size), vs}
			}
			if abort {
				return errAbort
			}
			return nil
		})
		switch {
		case err == nil:
			cur = next
		case errors.Is(err, errAbort), errors.Is(err, ErrNoSpace):
		default:
			t.Fatalf("op %d: %v", i, err)
		}
		want = append(want, cur.digest())
		mark(fmt.Sprint("op ", i))
	}
	return want
}

// readAllocs checks the allocator, reads every slot's value back (its
// checksum verified and its bytes compared with what was written) and
// checks that the live blocks are exactly the root and the values.
func readAllocs(h *Heap) (string, error) {
	var d string
	err := h.View(func(tx *ViewTx) error {
		root, st, ok, err := checkedRoot[allocRoot](tx, "alloc")
		if !ok || err != nil {
			return err
		}
		r, err := root.Lookup(tx)
		if err != nil {
			return err
		}
		var m allocModel
		live := int64(1)
		for i, b := range r.Vals {
			if b.Len() == 0 {
				continue
			}
			live++
			got, err := b.Lookup(tx)
			if err != nil {
				return fmt.Errorf("slot %d: %w", i, err)
			}
			if !bytes.Equal(got, allocVal(len(got), r.Seeds[i])) {
				return fmt.Errorf("slot %d: %d bytes, not those made from seed %d", i, len(got), r.Seeds[i])
			}
			m[i] = [2]uint64{uint64(len(got)), r.Seeds[i]}
		}
		if st.LiveObjects != live {
			return fmt.Errorf("leak: %d live blocks, %d reachable", st.LiveObjects, live)
		}
		d = m.digest()
		return nil
	})
	return d, err
}

func TestCrashAllocator(t *testing.T) {
	ops, nestEvery, opt := crashOptions()
	rec := crashsim.New(garbage(128 << 10))
	h, err := CreateMemory(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := allocWorkload(t, h, ops, 21, rec.Mark)
	if got, err := readAllocs(h); err != nil || got != want[len(want)-1] {
		t.Fatalf("live heap after workload: %v, %v", got, err)
	}
	// The workload must do what it is for: every kind of split and merge,
	// also when only a few operations run (-short).
	ev := h.allocEvents
	t.Logf("allocator: %+v", ev)
	if ev.reused < ops/4 || ev.splits < ops/8 || ev.mergedPrev < ops/16 || ev.mergedNext < ops/16 || ev.toTop < 2 {
		t.Fatalf("the workload reused %d free blocks, split %d, merged %d with the block before and %d with the one after, gave %d back to Top: too few to test them",
			ev.reused, ev.splits, ev.mergedPrev, ev.mergedNext, ev.toTop)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if total := crashCheck(t, rec, opt, nestEvery, want, readAllocs); !testing.Short() && total < 10000 {
		t.Fatalf("only %d crash states, want at least 10000", total)
	}
}
