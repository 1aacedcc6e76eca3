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
