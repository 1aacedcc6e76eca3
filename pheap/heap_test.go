package pheap

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type account struct {
	ID      uint64
	Balance int64
	Next    Ptr[account]
	Tags    [4]uint32
}

func newFileHeap(t *testing.T) (*Heap, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.heap")
	h, err := Create(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, path
}

func mustCheck(t *testing.T, h *Heap) Stats {
	t.Helper()
	var st Stats
	err := h.View(func(tx *ViewTx) (err error) {
		st, err = tx.Check()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestCreateOpenRoundTrip(t *testing.T) {
	h, path := newFileHeap(t)
	if m := h.Mode(); m != "dax" && m != "msync" {
		t.Fatalf("mode %q", m)
	}
	root, err := Root[account](h, "bank")
	if err != nil {
		t.Fatal(err)
	}
	err = h.Update(func(tx *Tx) error {
		a, err := root.Modify(tx)
		if err != nil {
			return err
		}
		a.ID = 1
		a.Balance = 100
		n, err := New[account](tx)
		if err != nil {
			return err
		}
		a.Next = n
		return n.Set(tx, account{ID: 2, Balance: -5, Tags: [4]uint32{1, 2, 3, 4}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.View(func(*ViewTx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("View after Close: %v", err)
	}

	h2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	err = h2.View(func(tx *ViewTx) error {
		r, err := Root[account](tx, "bank")
		if err != nil {
			return err
		}
		a := r.Get(tx)
		b := a.Next.Get(tx)
		if a.ID != 1 || a.Balance != 100 || b.ID != 2 || b.Balance != -5 || b.Tags[3] != 4 {
			t.Errorf("got %+v then %+v", a, b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st := mustCheck(t, h2)
	if st.LiveObjects != 2 {
		t.Fatalf("live objects %d, want 2", st.LiveObjects)
	}
}

// heldBytes returns the bytes of the heap file at path that the format
// defines: everything but the log, the arena past Top, and the payloads of
// free blocks past their link. A transaction that rolls back must leave
// these exactly as they were; the others it may scribble on (a block it
// allocated from Top or from a free list is not saved, see log.go).
func heldBytes(t *testing.T, h *Heap, path string) []byte {
	t.Helper()
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sb := &h.sb
	clear(img[sb.LogOff:sb.RootsOff])
	top := le.Uint64(img[sb.AllocOff+amTop:])
	for blk := sb.ArenaOff; blk < top; {
		size := le.Uint64(img[blk+bhSize:])
		if size == 0 || size > top-blk {
			t.Fatalf("block at %d has size %d", blk, size)
		}
		if le.Uint32(img[blk+bhState:]) == blockFree {
			clear(img[blk+freeHeaderSize : blk+size])
		}
		blk += size
	}
	clear(img[top:])
	return img
}

// diffAt describes the first difference of a and b.
func diffAt(h *Heap, a, b []byte) string {
	for i := range a {
		if a[i] != b[i] {
			region := "arena"
			switch sb := &h.sb; {
			case uint64(i) < sb.LogOff:
				region = "superblock"
			case uint64(i) < sb.AllocOff:
				region = "root table"
			case uint64(i) < sb.ArenaOff:
				region = "allocator metadata"
			}
			return fmt.Sprintf("byte %d (%s): %#x, was %#x", i, region, b[i], a[i])
		}
	}
	return "no difference"
}

func TestAbortAndPanicRollBack(t *testing.T) {
	h, path := newFileHeap(t)
	root, err := Root[account](h, "r")
	if err != nil {
		t.Fatal(err)
	}
	// Live objects to change and free, and a free block to reuse.
	var live [3]Ptr[account]
	err = h.Update(func(tx *Tx) error {
		for i := range live {
			if live[i], err = New[account](tx); err != nil {
				return err
			}
			if err := live[i].Set(tx, account{ID: uint64(100 + i), Balance: 7}); err != nil {
				return err
			}
		}
		return root.Set(tx, account{ID: 1, Balance: int64(live[1].Offset())})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Update(func(tx *Tx) error { return tx.Free(live[0]) }); err != nil {
		t.Fatal(err)
	}
	before := mustCheck(t, h)
	held := heldBytes(t, h, path)
	changeAll := func(tx *Tx) {
		root.Set(tx, account{ID: 9})
		live[1].Set(tx, account{ID: 666})
		tx.Free(live[2])
		for range 10 { // the first reuses live[0]'s block
			p, err := New[account](tx)
			if err != nil {
				t.Fatal(err)
			}
			p.Set(tx, account{ID: 42, Balance: -1})
		}
		New[[100]uint64](tx)
	}
	boom := errors.New("boom")
	err = h.Update(func(tx *Tx) error {
		changeAll(tx)
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v", err)
	}
	if got := heldBytes(t, h, path); !bytes.Equal(got, held) {
		t.Fatalf("aborted tx changed the heap: %s", diffAt(h, held, got))
	}
	func() {
		defer func() {
			if r := recover(); r != "panic in tx" {
				t.Fatalf("recovered %v", r)
			}
		}()
		h.Update(func(tx *Tx) error {
			changeAll(tx)
			panic("panic in tx")
		})
	}()
	if got := heldBytes(t, h, path); !bytes.Equal(got, held) {
		t.Fatalf("tx that panicked changed the heap: %s", diffAt(h, held, got))
	}
	after := mustCheck(t, h)
	if before != after {
		t.Fatalf("stats changed by aborted txs: %+v -> %+v", before, after)
	}
	h.View(func(tx *ViewTx) error {
		if got := root.Get(tx); got.ID != 1 {
			t.Fatalf("root after abort: %+v", got)
		}
		return nil
	})
}

func TestFreeReuse(t *testing.T) {
	h, _ := newFileHeap(t)
	var p Ptr[account]
	h.Update(func(tx *Tx) (err error) { p, err = New[account](tx); return })
	if err := h.Update(func(tx *Tx) error { return tx.Free(p) }); err != nil {
		t.Fatal(err)
	}
	if err := h.Update(func(tx *Tx) error { return tx.Free(p) }); !errors.Is(err, ErrBadPtr) {
		t.Fatalf("double free: %v", err)
	}
	var q Ptr[account]
	h.Update(func(tx *Tx) (err error) { q, err = New[account](tx); return })
	if q != p {
		t.Fatalf("freed block not reused: %v then %v", p, q)
	}
	st := mustCheck(t, h)
	if st.LiveObjects != 1 || st.FreeObjects != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestPointerTypesRefused(t *testing.T) {
	type inner struct{ Name string }
	type T struct {
		A     int
		Items [2]inner
	}
	err := CheckType[T]()
	if !errors.Is(err, ErrNotPointerFree) {
		t.Fatalf("got %v", err)
	}
	if want := "field .Items[0].Name is a string"; !strings.Contains(err.Error(), want) {
		t.Fatalf("%q does not say %q", err, want)
	}
	for name, err := range map[string]error{
		"ptr":   CheckType[struct{ P *int }](),
		"map":   CheckType[map[int]int](),
		"slice": CheckType[[]byte](),
		"chan":  CheckType[struct{ C chan int }](),
		"func":  CheckType[func()](),
		"iface": CheckType[struct{ E error }](),
	} {
		if !errors.Is(err, ErrNotPointerFree) {
			t.Errorf("%s accepted: %v", name, err)
		}
	}
	if err := CheckType[account](); err != nil {
		t.Fatal(err)
	}
	h, _ := newFileHeap(t)
	if _, err := Root[T](h, "bad"); !errors.Is(err, ErrNotPointerFree) {
		t.Fatalf("Root of pointerful type: %v", err)
	}
}

func TestRootTypeMismatch(t *testing.T) {
	h, _ := newFileHeap(t)
	if _, err := Root[account](h, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := Root[[3]uint64](h, "a"); !errors.Is(err, ErrRootType) {
		t.Fatalf("got %v", err)
	}
	err := h.View(func(tx *ViewTx) error {
		_, err := Root[account](tx, "missing")
		return err
	})
	if !errors.Is(err, ErrNoRoot) {
		t.Fatalf("got %v", err)
	}
	if _, err := Root[account](h, strings.Repeat("x", 33)); err == nil {
		t.Fatal("long name accepted")
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	h, err := Create(good, MinSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(good); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), good) {
		t.Fatalf("second open: %v", err)
	}
	if _, err := Create(good, MinSize); !errors.Is(err, os.ErrExist) {
		t.Fatalf("create over existing: %v", err)
	}
	h.Close()
	img, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), img...)) }
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrTooSmall},
		{"tiny", img[:100], ErrTooSmall},
		{"bad magic", mutate(func(b []byte) []byte { b[0] = 'X'; return b }), ErrNotHeap},
		{"zeros", make([]byte, MinSize), ErrNotHeap},
		{"version", mutate(func(b []byte) []byte { b[sbMajor] = 9; return b }), ErrVersion},
		{"format 1 heap", mutate(func(b []byte) []byte { b[sbMajor] = 1; return b }), ErrVersion},
		{"format 2 heap", mutate(func(b []byte) []byte { b[sbMajor] = 2; return b }), ErrVersion},
		{"checksum", mutate(func(b []byte) []byte { b[sbSize] ^= 1; return b }), ErrChecksum},
		{"truncated", img[:MinSize-pageSize], ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
			if err := os.WriteFile(p, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(p)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("got %v, want %v naming the path", err, tt.want)
			}
			// An older format is named, with the way out.
			if old := map[string]string{"format 1 heap": "version 1.0", "format 2 heap": "version 2.0"}[tt.name]; old != "" &&
				(!strings.Contains(err.Error(), old) || !strings.Contains(err.Error(), "copy the data out")) {
				t.Fatalf("%v does not name %s and the way out", err, old)
			}
			after, _ := os.ReadFile(p)
			if string(after) != string(tt.data) {
				t.Fatal("failed open modified the file")
			}
		})
	}
	if _, err := Create(filepath.Join(dir, "small"), 1000); !errors.Is(err, ErrTooSmall) {
		t.Fatalf("small create: %v", err)
	}
}

func TestStickyError(t *testing.T) {
	h, _ := newFileHeap(t)
	root, _ := Root[account](h, "r")
	err := h.Update(func(tx *Tx) error {
		root.Set(tx, account{ID: 5})
		New[[1 << 21]byte](tx) // larger than the heap: fails, error ignored
		return nil
	})
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("got %v", err)
	}
	h.View(func(tx *ViewTx) error {
		if root.Get(tx).ID != 0 {
			t.Fatal("tx with a failed op committed")
		}
		return nil
	})
}

func TestLogFull(t *testing.T) {
	h, _ := newFileHeap(t)
	var big Ptr[[64 << 10]byte]
	if err := h.Update(func(tx *Tx) (err error) { big, err = New[[64 << 10]byte](tx); return }); err != nil {
		t.Fatal(err)
	}
	// Rewriting a big existing object saves all of it: more than the log.
	var blob Ptr[[200 << 10]byte]
	if err := h.Update(func(tx *Tx) (err error) { blob, err = New[[200 << 10]byte](tx); return }); err != nil {
		t.Fatal(err)
	}
	err := h.Update(func(tx *Tx) error {
		var v [200 << 10]byte
		v[0] = 1
		return blob.Set(tx, v)
	})
	if !errors.Is(err, ErrLogFull) {
		t.Fatalf("got %v", err)
	}
	_ = big
	mustCheck(t, h)
}

// Opening a heap that needs no recovery must not write to it: a clean
// shutdown leaves the file exactly as Open finds it.
func TestOpenCleanHeapWritesNothing(t *testing.T) {
	h, path := newFileHeap(t)
	root, err := Root[account](h, "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Update(func(tx *Tx) error { return root.Set(tx, account{ID: 3}) }); err != nil {
		t.Fatal(err)
	}
	h.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	h2.Close()
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("Open of a clean heap changed the file")
	}
}

// A log that contradicts itself (a bit flip, a bad tool) could make
// recovery roll back committed transactions with stale bytes: Open refuses
// it without writing.
func TestOpenRefusesInconsistentLog(t *testing.T) {
	h, path := newFileHeap(t)
	root, err := Root[account](h, "r")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := h.Update(func(tx *Tx) error { return root.Set(tx, account{ID: uint64(i + 1)}) }); err != nil {
			t.Fatal(err)
		}
	}
	h.Close() // commits an empty generation: the newest is that one
	newest := h.gen - 1
	a, _ := h.logArea(newest)
	b, _ := h.logArea(newest - 1)
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		off  uint64
		val  uint64
	}{
		{"log header not zero", pageSize + 8, 1},
		{"generation in the wrong area", b, newest},
		{"generations not consecutive", b, newest - 3},
		{"newest generation too far ahead", a, newest + 2},
	} {
		bad := append([]byte(nil), img...)
		le.PutUint64(bad[c.off:], c.val)
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		h, err := Open(path)
		if err == nil {
			h.Close()
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
		}
		if after, _ := os.ReadFile(path); string(after) != string(bad) {
			t.Errorf("%s: failed open changed the file", c.name)
		}
	}
}

// A crash can leave a whole commit record whose fresh lines did not reach
// memory. Recovery rolls that transaction back and spoils the record; the
// heap must then open again (the record is the first entry of its area, so
// a spoilt Gen word would look like a gap in the log) and take and keep
// new transactions.
func TestRecoveryOfWholeRecordThenMore(t *testing.T) {
	// Sizes that make blocks of whole cache lines (64 and 1024 bytes with
	// the block header), so each blob's header line is fresh.
	type blob [1024 - blockHeaderSize]byte
	type rootObj struct {
		P Ptr[blob]
		_ [64 - blockHeaderSize - 8]byte
	}
	mem := volatileMem(garbage(128 << 10))
	h, err := CreateMemory(mem)
	if err != nil {
		t.Fatal(err)
	}
	root, err := Root[rootObj](h, "blob")
	if err != nil {
		t.Fatal(err)
	}
	// Past generation 2, so a gap in the log would show; allocating each
	// time leaves the allocator's lines in the last record's redo, so the
	// transaction below saves nothing and its record starts its area.
	var want Ptr[blob]
	for range 3 {
		if err := h.Update(func(tx *Tx) (err error) {
			if want, err = New[blob](tx); err != nil {
				return err
			}
			return root.Set(tx, rootObj{P: want})
		}); err != nil {
			t.Fatal(err)
		}
	}
	img := volatileMem(append([]byte(nil), mem...))
	if err := h.Update(func(tx *Tx) error {
		p, err := New[blob](tx)
		if err != nil {
			return err
		}
		if err := p.Set(tx, blob{1}); err != nil {
			return err
		}
		return root.Set(tx, rootObj{P: p})
	}); err != nil {
		t.Fatal(err)
	}
	lo, hi := h.sb.LogOff, h.sb.LogOff+h.sb.LogSize
	copy(img[lo:hi], mem[lo:hi]) // the record reached memory, the blob did not
	if st, _ := h.scanArea((h.gen - 1) % 2); len(st.ents) != 0 || st.cr == nil {
		t.Fatalf("the transaction saved %d ranges (%+v, alloc %d arena %d); the test needs its record first in its area", len(st.ents), st.ents, h.sb.AllocOff, h.sb.ArenaOff)
	}
	for round := range 3 {
		h2, err := OpenMemory(img)
		if err != nil {
			t.Fatalf("open %d: %v", round, err)
		}
		h2.View(func(tx *ViewTx) error {
			if got := root.Get(tx).P; got != want {
				t.Errorf("open %d: root %v, want %v", round, got, want)
			}
			return nil
		})
		if round == 1 {
			if err := h2.Update(func(tx *Tx) (err error) {
				if want, err = New[blob](tx); err != nil {
					return err
				}
				return root.Set(tx, rootObj{P: want})
			}); err != nil {
				t.Fatalf("update after open %d: %v", round, err)
			}
		}
	}
}

// A Create cut short by a power cut leaves its heap under the temporary
// name, never a file of zeros at the heap's path: a later Create succeeds
// over what it left, and leaves nothing beside the heap.
func TestCreateAfterCutShortCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kv.heap")
	// What a cut during Create leaves: the temporary file, zeros.
	if err := os.WriteFile(creatingName(path), make([]byte, MinSize), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the heap's path exists before Create: %v", err)
	}
	h, err := Create(path, MinSize)
	if err != nil {
		t.Fatalf("Create over a cut-short Create: %v", err)
	}
	h.Close()
	if _, err := os.Stat(creatingName(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file is left: %v", err)
	}
	h, err = Open(path)
	if err != nil {
		t.Fatalf("Open after Create: %v", err)
	}
	h.Close()
	if _, err := Create(path, MinSize); !errors.Is(err, os.ErrExist) {
		t.Errorf("Create over a heap: %v, want ErrExist", err)
	}
}
