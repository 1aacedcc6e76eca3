package pheap

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
)

// A bit flipped in a stored value or in the heap's
// metadata is an error where it is read, never data. Each case flips one
// bit of a small heap's image and says what must notice.
func TestChecksumsCatchFlippedBits(t *testing.T) {
	type rootT struct {
		Val  Bytes
		Name String
		Gap  Ptr[[200]byte] // freed: leaves a free block between live ones
		Next Ptr[[3]uint64]
	}
	val := bytes.Repeat([]byte("value bytes "), 40)
	build := func() (volatileMem, rootT) {
		mem := volatileMem(make([]byte, 256<<10))
		h, err := CreateMemory(mem)
		if err != nil {
			t.Fatal(err)
		}
		root, err := Root[rootT](h, "r")
		if err != nil {
			t.Fatal(err)
		}
		var r rootT
		err = h.Update(func(tx *Tx) (err error) {
			if r.Val, err = NewBytes(tx, val); err != nil {
				return err
			}
			if r.Name, err = NewString(tx, "a name in the heap"); err != nil {
				return err
			}
			if r.Gap, err = New[[200]byte](tx); err != nil {
				return err
			}
			if r.Next, err = New[[3]uint64](tx); err != nil {
				return err
			}
			return root.Set(tx, r)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Update(func(tx *Tx) error { return tx.Free(r.Gap) }); err != nil {
			t.Fatal(err)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		return mem, r
	}
	_, r := build()
	sb := layoutFor(256 << 10)
	for _, c := range []struct {
		name string
		off  uint64 // byte whose bit 3 flips
		// where the flip must show: "open" (Open fails), "check" (Check
		// fails), "val" or "name" (reading it fails; Check too)
		want string
		err  error
	}{
		{"value data", r.Val.Offset() + 300, "val", ErrChecksum},
		{"value data, last byte", r.Val.Offset() + uint64(len(val)) - 1, "val", ErrChecksum},
		{"string data", r.Name.Offset() + 3, "name", ErrChecksum},
		{"value block size", r.Val.Offset() - blockHeaderSize + bhSize + 1, "val", ErrBadPtr},
		{"value block type", r.Val.Offset() - blockHeaderSize + bhType, "val", ErrBadPtr},
		{"value block data checksum", r.Val.Offset() - blockHeaderSize + bhDataSum, "val", ErrBadPtr},
		{"free block link", r.Gap.Offset() - blockHeaderSize + bhNext, "check", ErrCorrupt},
		{"free block size", r.Gap.Offset() - blockHeaderSize + bhSize + 1, "check", ErrCorrupt},
		{"allocator top", sb.AllocOff + amTop + 1, "open", ErrCorrupt},
		{"allocator live bytes", sb.AllocOff + amLiveBytes, "open", ErrCorrupt},
		{"root pointer", sb.RootsOff + rootPtr + 1, "open", ErrCorrupt},
		{"root type", sb.RootsOff + rootType, "open", ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem, r := build()
			mem[c.off] ^= 1 << 3
			h, err := OpenMemory(mem)
			if c.want == "open" {
				if !errors.Is(err, c.err) {
					t.Fatalf("open: %v, want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			h.View(func(tx *ViewTx) error {
				var readErr error
				switch c.want {
				case "val":
					var got []byte
					got, readErr = r.Val.Lookup(tx)
					if readErr == nil && !bytes.Equal(got, val) {
						t.Errorf("read %q", got)
					}
					if p := catch(func() { r.Val.Get(tx) }); !errors.Is(p, c.err) {
						t.Errorf("Get panicked with %v, want %v", p, c.err)
					}
				case "name":
					_, readErr = r.Name.Lookup(tx)
					if p := catch(func() { r.Name.Get(tx) }); !errors.Is(p, c.err) {
						t.Errorf("Get panicked with %v, want %v", p, c.err)
					}
				}
				if c.want != "check" && !errors.Is(readErr, c.err) {
					t.Errorf("read: %v, want %v", readErr, c.err)
				}
				if _, err := tx.Check(); !errors.Is(err, ErrCorrupt) {
					t.Errorf("Check: %v, want %v", err, ErrCorrupt)
				}
				return nil
			})
		})
	}
}

// catch runs f and returns what it panicked with, as an error.
func catch(f func()) (err error) {
	defer func() {
		switch r := recover().(type) {
		case nil:
		case error:
			err = r
		default:
			err = fmt.Errorf("%v", r)
		}
	}()
	f()
	return errors.New("no panic")
}

// The reason the stored checksums are masked: a plain CRC-32C stored right
// after the bytes it covers makes them a codeword, so a CRC-32C over a
// span holding them (a log entry's, a commit record's) does not change
// when they change together. Two states of the allocator's counters line,
// as a commit record's redo copies it, must give the record two checksums.
func TestMaskedSumsDefeatNestedCRC(t *testing.T) {
	line := func(m allocMeta, masked bool) []byte {
		b := make([]byte, lineSize)
		m.encode(b)
		if !masked {
			le.PutUint32(b[amChecksum:], crc32.Checksum(b[:amChecksum], castagnoli))
		}
		return b
	}
	a, b := allocMeta{top: 40960, lastSize: 64, liveBytes: 4096, liveObjects: 3}, allocMeta{top: 41024, lastSize: 64, liveBytes: 4160, liveObjects: 4}
	outer := func(line []byte) uint32 { return crc32.Checksum(line, castagnoli) }
	if outer(line(a, false)) != outer(line(b, false)) {
		t.Fatal("plain nested CRC-32C: the outer CRC-32C changed, so the premise of masking is wrong")
	}
	if outer(line(a, true)) == outer(line(b, true)) {
		t.Fatal("masked checksums: the outer CRC-32C cannot tell the two counters lines apart")
	}
}
