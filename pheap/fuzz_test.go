package pheap

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// fuzzBases are deterministic heap images the fuzzer corrupts: an empty
// heap, a heap with objects, strings, a map and a free block, the same
// with a transaction cut short (valid undo entries for recovery to apply),
// and the same closed cleanly (Open re-stores no redo, so a change to the
// blocks, bins or counters stays for Open and Check to find).
var fuzzBases = sync.OnceValue(func() [][]byte {
	const size = MinSize
	fixSB := func(b []byte) {
		sb, err := decodeSuperblock(b)
		if err != nil {
			panic(err)
		}
		sb.UUID, sb.Created = [16]byte{}, 0 // deterministic bytes
		copy(b, sb.encode())
	}
	empty := volatileMem(make([]byte, size))
	if _, err := CreateMemory(empty); err != nil {
		panic(err)
	}
	fixSB(empty)

	full := volatileMem(make([]byte, size))
	h, err := CreateMemory(full)
	if err != nil {
		panic(err)
	}
	nonce := uint64(0)
	h.nonce = func() uint64 { nonce++; return nonce }
	fixSB(full)
	root, err := Root[collRoot](h, "coll")
	if err != nil {
		panic(err)
	}
	err = h.Update(func(tx *Tx) error {
		r, err := root.Modify(tx)
		if err != nil {
			return err
		}
		if r.Nums, err = NewMap[uint64, uint64](tx); err != nil {
			return err
		}
		if err := tx.Write(r.Nums.Offset()+24, make([]byte, 8)); err != nil { // fixed seed
			return err
		}
		for i := range uint64(10) {
			if err := r.Nums.Put(tx, i, i*i); err != nil {
				return err
			}
		}
		if r.Log, err = r.Log.Append(tx, 1, 2, 3); err != nil {
			return err
		}
		r.Title, err = NewString(tx, "fuzz")
		return err
	})
	if err != nil {
		panic(err)
	}

	// An interrupted transaction: run one, then spoil its commit record so
	// its entries are live again, as if the commit never happened.
	torn := volatileMem(bytes.Clone(full))
	h2, err := OpenMemory(torn)
	if err != nil {
		panic(err)
	}
	h2.nonce = h.nonce
	err = h2.Update(func(tx *Tx) error {
		r, err := root.Modify(tx)
		if err != nil {
			return err
		}
		r.Nums.Delete(tx, 3)
		return r.Nums.Put(tx, 99, 1)
	})
	if err != nil {
		panic(err)
	}
	st, err := h2.scanArea((h2.gen - 1) % 2)
	if err != nil || st.cr == nil {
		panic(fmt.Sprintf("no commit record after a commit: %v", err))
	}
	torn[st.cr.pos+entChecksum] ^= 0xFF

	closed := volatileMem(bytes.Clone(full))
	h3, err := OpenMemory(closed)
	if err != nil {
		panic(err)
	}
	h3.nonce = h.nonce
	if err := h3.Close(); err != nil {
		panic(err)
	}
	return [][]byte{empty, full, torn, closed}
})

// fuzzImage builds a file image: base selects a heap image (or, past the
// bases, starts from nothing), patch is a list of 4-byte records (24-bit
// offset, value) written over it, and size, if not 0, truncates or extends
// it. This keeps seeds small while reaching every byte of a real heap.
func fuzzImage(base uint8, patch []byte, size uint32) []byte {
	var img []byte
	if bases := fuzzBases(); int(base) < len(bases) {
		img = bytes.Clone(bases[base])
	} else {
		img = bytes.Clone(patch) // free form: the patch is the file
		patch = nil
	}
	if size != 0 {
		size = min(size, 1<<20)
		if int(size) <= len(img) {
			img = img[:size]
		} else {
			img = append(img, make([]byte, int(size)-len(img))...)
		}
	}
	for ; len(patch) >= 4; patch = patch[4:] {
		off := int(patch[0]) | int(patch[1])<<8 | int(patch[2])<<16
		if off < len(img) {
			img[off] = patch[3]
		}
	}
	return img
}

func FuzzOpen(f *testing.F) {
	f.Add(uint8(0), []byte{}, uint32(0))
	f.Add(uint8(1), []byte{}, uint32(0))
	f.Add(uint8(2), []byte{}, uint32(0))
	f.Add(uint8(3), []byte{}, uint32(0))
	f.Fuzz(func(t *testing.T, base uint8, patch []byte, size uint32) {
		img := fuzzImage(base, patch, size)
		path := filepath.Join(t.TempDir(), "heap")
		if err := os.WriteFile(path, img, 0o600); err != nil {
			t.Fatal(err)
		}
		h, err := Open(path)
		if err != nil {
			known := false
			for _, e := range []error{ErrNotHeap, ErrVersion, ErrTooSmall, ErrTruncated, ErrChecksum, ErrCorrupt} {
				known = known || errors.Is(err, e)
			}
			if !known {
				t.Fatalf("open failed with an unclassified error: %v", err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, img) {
				t.Fatalf("failed open (%v) modified the file", err)
			}
			return
		}
		defer h.Close()
		// Open verifies what recovery relies on, in time independent of
		// the heap size; it does not walk the arena (see Open). So a heap
		// whose blocks, free lists or live counters are corrupt may open,
		// and then Check must say so (ErrCorrupt, or ErrBadPtr for a root),
		// every access must fail with an error rather than panic, and a
		// heap that checks out must keep working and reopen. Where Open
		// does verify every byte, the superblock page and the log header,
		// a change either fails Open or is one the format ignores.
		var checkErr error
		h.View(func(tx *ViewTx) error {
			_, checkErr = tx.Check()
			tx.Roots()
			return nil
		})
		if checkErr != nil && !errors.Is(checkErr, ErrCorrupt) && !errors.Is(checkErr, ErrBadPtr) {
			t.Fatalf("Check failed with an unclassified error: %v", checkErr)
		}
		if bases := fuzzBases(); checkErr != nil && int(base) < len(bases) && len(img) == len(bases[base]) {
			first, last := firstDiff(img, bases[base]), lastDiff(img, bases[base])
			if first >= 0 && last < pageSize+logHeaderSize {
				t.Fatalf("Open accepted changes to bytes %d..%d (superblock page, log header), and Check fails: %v", first, last, checkErr)
			}
		}
		var p Ptr[[3]uint64]
		updErr := h.Update(func(tx *Tx) (err error) {
			if p, err = New[[3]uint64](tx); err != nil {
				return err
			}
			return p.Set(tx, [3]uint64{1, 2, 3})
		})
		if checkErr != nil {
			return
		}
		if updErr != nil && !errors.Is(updErr, ErrNoSpace) {
			t.Fatalf("heap passed Check but Update failed: %v", updErr)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		h2, err := Open(path)
		if err != nil {
			t.Fatalf("heap passed Check and committed, but reopening fails: %v", err)
		}
		defer h2.Close()
		err = h2.View(func(tx *ViewTx) error {
			if _, err := tx.Check(); err != nil {
				return err
			}
			if updErr == nil {
				if v, err := p.Lookup(tx); err != nil || v != [3]uint64{1, 2, 3} {
					t.Fatalf("committed object reads %v, %v", v, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("reopened heap fails Check: %v", err)
		}
	})
}

// firstDiff and lastDiff return the first and last index where a and b
// (of one length) differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func lastDiff(a, b []byte) int {
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
