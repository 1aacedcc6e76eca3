package pheap

import (
	"errors"
	"testing"
)

// A block freed and allocated again in one transaction still holds live
// data as far as a rollback is concerned: the abort brings the freed object
// back, so its old contents must come back too.
func TestFreeThenReuseInOneTxRollsBack(t *testing.T) {
	h, _ := newFileHeap(t)
	type big struct {
		account
		Pad [200]byte
		End uint64
	}
	var p Ptr[big]
	err := h.Update(func(tx *Tx) (err error) {
		if p, err = New[big](tx); err != nil {
			return err
		}
		return p.Set(tx, big{account: account{ID: 7, Balance: 700}, Pad: [200]byte{100: 7}, End: 7})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = h.Update(func(tx *Tx) error {
		if err := tx.Free(p); err != nil {
			return err
		}
		q, err := New[big](tx)
		if err != nil {
			return err
		}
		if q != p {
			t.Fatalf("freed block not reused in the same transaction: %v then %v", p, q)
		}
		if err := q.Set(tx, big{account: account{ID: 9}, Pad: [200]byte{100: 9}, End: 9}); err != nil {
			return err
		}
		return errAbort
	})
	if !errors.Is(err, errAbort) {
		t.Fatal(err)
	}
	h.View(func(tx *ViewTx) error {
		if got := p.Get(tx); got.ID != 7 || got.Balance != 700 || got.Pad[100] != 7 || got.End != 7 {
			t.Fatalf("object freed and reused by an aborted transaction reads %+v", got)
		}
		return nil
	})
	mustCheck(t, h)
}

// fillBytes allocates n-byte values, one transaction each, until the heap
// is out of space, and returns them.
func fillBytes(t *testing.T, h *Heap, n int) []Bytes {
	t.Helper()
	val := make([]byte, n)
	for i := range val {
		val[i] = byte(i*7 + n)
	}
	var vs []Bytes
	for {
		var b Bytes
		err := h.Update(func(tx *Tx) (err error) {
			b, err = NewBytes(tx, val)
			return err
		})
		if errors.Is(err, ErrNoSpace) {
			return vs
		}
		if err != nil {
			t.Fatalf("value %d of %d bytes: %v", len(vs), n, err)
		}
		vs = append(vs, b)
	}
}

// freeAll frees the values, a hundred a transaction.
func freeAll(t *testing.T, h *Heap, vs []Bytes) {
	t.Helper()
	for len(vs) > 0 {
		batch := vs[:min(100, len(vs))]
		vs = vs[len(batch):]
		if err := h.Update(func(tx *Tx) error {
			for _, b := range batch {
				if err := tx.Free(b); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// A heap filled with 1 MiB values and emptied again takes
// values of any size, and they fill at least 90 % of the heap again; a
// 1 MiB value does not take a 2 MiB block.
func TestFreedSpaceReusableAtAnySize(t *testing.T) {
	const size = 64 << 20
	h, err := CreateMemory(volatileMem(make([]byte, size)))
	if err != nil {
		t.Fatal(err)
	}
	big := fillBytes(t, h, 1<<20)
	if st := mustCheck(t, h); st.LiveBytes > int64(len(big))*(1<<20+64) {
		t.Errorf("%d values of 1 MiB take %d bytes: %d each", len(big), st.LiveBytes, st.LiveBytes/int64(len(big)))
	}
	freeAll(t, h, big)
	for _, n := range []int{1 << 10, 100_000, 1 << 20} {
		vs := fillBytes(t, h, n)
		if got := float64(len(vs)*n) / size; got < 0.9 {
			t.Errorf("after freeing everything, %d values of %d bytes fit: %.3f of the heap, want at least 0.9", len(vs), n, got)
		}
		mustCheck(t, h)
		freeAll(t, h, vs)
	}
	if st := mustCheck(t, h); st.LiveObjects != 0 {
		t.Fatalf("%d objects left", st.LiveObjects)
	}
}
