package pheap

import (
	"runtime/debug"
	"testing"

	"golang.org/x/sys/unix"
)

// protMem is a Memory in an anonymous mapping whose parts the test can make
// unreadable: a read there faults, which SetPanicOnFault turns into a
// panic the test sees.
type protMem []byte

func (m protMem) Bytes() []byte { return m }
func (protMem) Flush(int, int)  {}
func (protMem) Fence()          {}

// After a clean Close, Open must read nothing of the arena: not the lines
// the last transaction wrote (map slots spread over a table, one page
// fault each), nor its in-place runs; nor the last transaction's log
// entries, which may be megabytes. That keeps open-to-first-read the
// same for any heap size; a heap of 1 GiB whose last transaction put 64
// keys into a map of 2^18 slots took 51 page faults more to open than a
// heap of 1 MiB before Close committed an empty generation.
func TestOpenAfterCloseReadsOnlyMetadata(t *testing.T) {
	const size = 8 << 20
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	mem := protMem(b)
	h, err := CreateMemory(mem)
	if err != nil {
		t.Fatal(err)
	}
	type rootT struct{ M Map[uint64, uint64] }
	root, err := Root[rootT](h, "r")
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < 20000; i += 500 {
		err := h.Update(func(tx *Tx) error {
			r, err := root.Modify(tx)
			if err != nil {
				return err
			}
			if r.M.IsNil() {
				if r.M, err = NewMap[uint64, uint64](tx); err != nil {
					return err
				}
			}
			for k := i; k < i+500; k++ {
				if err := r.M.Put(tx, k, k*3); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := h.scanArea((h.gen - 1) % 2); st.cr == nil || len(st.cr.redo) < 10 {
		t.Fatalf("the last transaction should leave redo runs in the arena: %+v", st.cr)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	arena := b[h.sb.ArenaOff:]
	// The area of the last Update, but the page of its Gen word: its
	// entries are dead once the empty generation after it committed.
	start, end := h.logArea(h.gen - 2)
	first := (start + pageSize) &^ (pageSize - 1)
	if end-first < 4*pageSize {
		t.Fatalf("log area [%d, %d) too small for the test", start, end)
	}
	if st, _ := h.scanArea((h.gen - 2) % 2); st.cr == nil || st.cr.pos < first+pageSize {
		t.Fatalf("the last Update's record should lie past the first page of its area: %+v", st.cr)
	}
	oldLog := b[first : end&^(pageSize-1)]
	for _, r := range [][]byte{arena, oldLog} {
		if err := unix.Mprotect(r, unix.PROT_NONE); err != nil {
			t.Fatal(err)
		}
	}
	h2, err := func() (h2 *Heap, err error) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Open after a clean Close read the arena: %v", r)
			}
		}()
		return OpenMemory(mem)
	}()
	for _, r := range [][]byte{arena, oldLog} {
		if err := unix.Mprotect(r, unix.PROT_READ|unix.PROT_WRITE); err != nil {
			t.Fatal(err)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	h2.View(func(tx *ViewTx) error {
		m := root.Get(tx).M
		for _, k := range []uint64{0, 12345, 19999} {
			if v, ok := m.Get(tx, k); !ok || v != k*3 {
				t.Errorf("key %d: %d, %v", k, v, ok)
			}
		}
		return nil
	})
	mustCheck(t, h2)
	// Open and Close without an Update write nothing, not even a record.
	img := append([]byte(nil), b...)
	if err := h2.Close(); err != nil {
		t.Fatal(err)
	}
	h3, err := OpenMemory(mem)
	if err != nil {
		t.Fatal(err)
	}
	h3.Close()
	if string(img) != string(b) {
		t.Fatal("open and close without an update changed the heap")
	}
}
