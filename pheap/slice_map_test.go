package pheap

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
)

func TestReferenceTypeSizes(t *testing.T) {
	// These headers are stored inside user objects: their layout is format.
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"Slice", unsafe.Sizeof(Slice[int64]{}), 24},
		{"String", unsafe.Sizeof(String{}), 16},
		{"Bytes", unsafe.Sizeof(Bytes{}), 16},
		{"Map", unsafe.Sizeof(Map[int, int]{}), 8},
		{"mapHdr", unsafe.Sizeof(mapHdr{}), 32},
		{"mapSlot[uint64,uint64]", unsafe.Sizeof(mapSlot[uint64, uint64]{}), 24},
		{"mapSlot[String,uint32]", unsafe.Sizeof(mapSlot[String, uint32]{}), 32},
	} {
		if c.got != c.want {
			t.Errorf("%s is %d bytes, frozen at %d", c.name, c.got, c.want)
		}
	}
}

type doc struct {
	Title String
	Body  Bytes
	Nums  Slice[int32]
}

func TestSliceStringBytes(t *testing.T) {
	h, path := newFileHeap(t)
	root, err := Root[doc](h, "doc")
	if err != nil {
		t.Fatal(err)
	}
	err = h.Update(func(tx *Tx) error {
		d, err := root.Modify(tx)
		if err != nil {
			return err
		}
		if d.Title, err = NewString(tx, "hello, heap"); err != nil {
			return err
		}
		if d.Body, err = NewBytes(tx, []byte{1, 2, 3}); err != nil {
			return err
		}
		for i := range 100 {
			if d.Nums, err = d.Nums.Append(tx, int32(i)); err != nil {
				return err
			}
		}
		return d.Nums.Set(tx, 5, -5)
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	h, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.View(func(tx *ViewTx) error {
		d := root.Get(tx)
		if got := d.Title.Get(tx); got != "hello, heap" {
			t.Errorf("title %q", got)
		}
		if got := d.Body.Get(tx); string(got) != "\x01\x02\x03" {
			t.Errorf("body %v", got)
		}
		if d.Nums.Len() != 100 || d.Nums.Cap() < 100 {
			t.Errorf("len %d cap %d", d.Nums.Len(), d.Nums.Cap())
		}
		for i, v := range d.Nums.All(tx) {
			want := int32(i)
			if i == 5 {
				want = -5
			}
			if v != want {
				t.Fatalf("nums[%d] = %d", i, v)
			}
		}
		return nil
	})
	st := mustCheck(t, h)
	// root, title, body, and exactly one live element block (older ones freed)
	if st.LiveObjects != 4 {
		t.Fatalf("%d live objects, want 4", st.LiveObjects)
	}
	err = h.Update(func(tx *Tx) error {
		return root.Get(&tx.ViewTx).Nums.Set(tx, 100, 1)
	})
	if !errors.Is(err, ErrBadPtr) {
		t.Fatalf("out of range Set: %v", err)
	}
}

func TestMapAgainstGoMap(t *testing.T) {
	h, _ := newFileHeap(t)
	type key struct{ A, B uint32 }
	var m Map[key, uint64]
	if err := h.Update(func(tx *Tx) (err error) { m, err = NewMap[key, uint64](tx); return }); err != nil {
		t.Fatal(err)
	}
	want := map[key]uint64{}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 60 {
		err := h.Update(func(tx *Tx) error {
			for range 50 {
				k := key{rng.Uint32N(300), 7}
				if rng.IntN(3) == 0 {
					ok, err := m.Delete(tx, k)
					if err != nil {
						return err
					}
					if _, had := want[k]; had != ok {
						return fmt.Errorf("delete %v: got %v, had %v", k, ok, had)
					}
					delete(want, k)
				} else {
					v := rng.Uint64()
					if err := m.Put(tx, k, v); err != nil {
						return err
					}
					want[k] = v
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		h.View(func(tx *ViewTx) error {
			if m.Len(tx) != len(want) {
				t.Fatalf("len %d, want %d", m.Len(tx), len(want))
			}
			for k, v := range want {
				if got, ok := m.Get(tx, k); !ok || got != v {
					t.Fatalf("get %v: %d %v, want %d", k, got, ok, v)
				}
			}
			n := 0
			for k, v := range m.All(tx) {
				if want[k] != v {
					t.Fatalf("All yields %v=%d, want %d", k, v, want[k])
				}
				n++
			}
			if n != len(want) {
				t.Fatalf("All yields %d entries, want %d", n, len(want))
			}
			return nil
		})
	}
	mustCheck(t, h)
}

func TestMapStringKeys(t *testing.T) {
	h, _ := newFileHeap(t)
	var m Map[String, uint32]
	err := h.Update(func(tx *Tx) (err error) {
		if m, err = NewMap[String, uint32](tx); err != nil {
			return err
		}
		for i := range 200 {
			if err := m.PutString(tx, fmt.Sprintf("key-%d", i), uint32(i)); err != nil {
				return err
			}
		}
		// Put with a persistent String compares by content and copies.
		k, err := NewString(tx, "key-7")
		if err != nil {
			return err
		}
		if err := m.Put(tx, k, 777); err != nil {
			return err
		}
		if err := tx.Free(k); err != nil {
			return err
		}
		for i := 0; i < 200; i += 2 {
			if ok, err := m.DeleteString(tx, fmt.Sprintf("key-%d", i)); err != nil || !ok {
				return fmt.Errorf("delete %d: %v %v", i, ok, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	before := mustCheck(t, h)
	h.View(func(tx *ViewTx) error {
		if m.Len(tx) != 100 {
			t.Fatalf("len %d", m.Len(tx))
		}
		if v, ok := m.GetString(tx, "key-7"); !ok || v != 777 {
			t.Fatalf("key-7: %d %v", v, ok)
		}
		if _, ok := m.GetString(tx, "key-8"); ok {
			t.Fatal("deleted key found")
		}
		for k, v := range m.All(tx) {
			if want := fmt.Sprintf("key-%d", v); v != 777 && k.Get(tx) != want {
				t.Fatalf("%q=%d", k.Get(tx), v)
			}
		}
		return nil
	})
	// header + slots + one String per key.
	if before.LiveObjects != 1+1+100 {
		t.Fatalf("%d live objects, want 102", before.LiveObjects)
	}
	if err := h.Update(func(tx *Tx) error { return tx.Free(m) }); err != nil {
		t.Fatal(err)
	}
	if st := mustCheck(t, h); st.LiveObjects != 0 {
		t.Fatalf("%d live objects after freeing the map", st.LiveObjects)
	}
}

func TestMapRefusesPaddedKey(t *testing.T) {
	h, _ := newFileHeap(t)
	type padded struct {
		A uint8
		B uint64
	}
	err := h.Update(func(tx *Tx) error {
		_, err := NewMap[padded, int](tx)
		return err
	})
	if !errors.Is(err, ErrNotPointerFree) {
		t.Fatalf("got %v", err)
	}
}

// Map.Objects accounts for every object a map owns: with the root it must
// match the live objects Check counts, through growth, deletes and an
// empty key (which owns no copy).
func TestMapObjectsAccountsForLiveObjects(t *testing.T) {
	h, _ := newFileHeap(t)
	type rootT struct {
		Names Map[String, uint32]
		Nums  Map[uint64, uint64]
		Nil   Map[String, uint32]
	}
	root, err := Root[rootT](h, "r")
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		st := mustCheck(t, h)
		h.View(func(tx *ViewTx) error {
			r := root.Get(tx)
			n := 1
			for _, c := range []func(Reader) (int, error){r.Names.Objects, r.Nums.Objects, r.Nil.Objects} {
				k, err := c(tx)
				if err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				n += k
			}
			if int64(n) != st.LiveObjects {
				t.Errorf("%s: the maps account for %d objects with the root, Check counts %d", when, n, st.LiveObjects)
			}
			return nil
		})
	}
	check("empty")
	err = h.Update(func(tx *Tx) error {
		r, err := root.Modify(tx)
		if err != nil {
			return err
		}
		if r.Names, err = NewMap[String, uint32](tx); err != nil {
			return err
		}
		r.Nums, err = NewMap[uint64, uint64](tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	check("new maps")
	err = h.Update(func(tx *Tx) error {
		r := root.Get(tx)
		for i := range 100 {
			if err := r.Names.PutString(tx, fmt.Sprint("name-", i), uint32(i)); err != nil {
				return err
			}
			if err := r.Nums.Put(tx, uint64(i), 1); err != nil {
				return err
			}
		}
		return r.Names.PutString(tx, "", 7)
	})
	if err != nil {
		t.Fatal(err)
	}
	check("after puts")
	err = h.Update(func(tx *Tx) error {
		r := root.Get(tx)
		for i := range 30 {
			if _, err := r.Names.DeleteString(tx, fmt.Sprint("name-", i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check("after deletes")
}
