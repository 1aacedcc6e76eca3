package omf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
)

// FuzzAccess runs a sequence of operations decoded from the input against a
// File and an in-memory copy of the file, and requires every byte read to
// equal the copy's: reads (ReadAt, ReadBlock), windows held across other
// operations and released later, writes through WriteBlock with SyncBlock,
// appends and truncations done behind the File's back, and Unmap with
// windows held (they keep their chunks; the next read maps again). Each
// operation is 4 bytes: kind, two operands, a value.
func FuzzAccess(f *testing.F) {
	f.Add([]byte{0, 0, 9, 0, 1, 1, 2, 0, 2, 0, 1, 7, 4, 3, 0, 0, 0, 0, 40, 0})
	f.Add([]byte{1, 0, 3, 1, 5, 0, 0, 0, 1, 1, 2, 0, 6, 0, 0, 0, 0, 4, 40, 0})
	f.Add([]byte{2, 1, 1, 9, 3, 2, 0, 0, 4, 0, 0, 0, 2, 0, 2, 1})
	f.Add([]byte{1, 0, 1, 1, 0, 30, 9, 0, 7, 0, 0, 0, 0, 2, 40, 0, 3, 0, 0, 0, 7, 0, 0, 0, 1, 1, 2, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 4*64 {
			return
		}
		bs := BlockSize()
		path, ref := writeRef(t, 5*bs+123, uint64(len(ops)))
		of, err := Open(path, Options{Writable: true, ChunkSize: 2 * bs})
		if err != nil {
			t.Fatal(err)
		}
		var held []*Window
		truncated := false // the file shrank while a mapping of its old pages may be used
		for ; len(ops) >= 4; ops = ops[4:] {
			kind, a, b, v := ops[0]%8, int(ops[1]), int(ops[2]), ops[3]
			nblk := (len(ref) + bs - 1) / bs
			switch kind {
			case 0: // ReadAt: offset and length in 97-byte steps, crossing blocks and chunks
				off, n := a*97, b*97+1
				p := make([]byte, n)
				got, err := of.ReadAt(p, int64(off))
				want := max(0, min(n, len(ref)-off))
				if truncated && errors.Is(err, ErrTruncated) {
					continue
				}
				if truncated && got > want {
					// ReadAt trusts the size it last saw: past the new
					// end, inside the last page, it reads the zeros the
					// kernel maps there.
					if !bytes.Equal(p[:want], ref[off:off+want]) || bytes.ContainsFunc(p[want:got], func(r rune) bool { return r != 0 }) {
						t.Fatalf("ReadAt(%d, %d) after truncation to %d: wrong bytes", off, n, len(ref))
					}
					continue
				}
				if got != want || (want < n) != (err != nil) || (err != nil && !errors.Is(err, io.EOF)) {
					t.Fatalf("ReadAt(%d, %d) = %d, %v; file is %d bytes", off, n, got, err, len(ref))
				}
				if got > 0 && !bytes.Equal(p[:got], ref[off:off+got]) {
					t.Fatalf("ReadAt(%d, %d) differs from the reference", off, n)
				}
			case 1: // ReadBlock, held when v is odd
				blk, n := int64(a%8), int64(b%4+1)
				w, err := of.ReadBlock(blk, n)
				if truncated && err == nil {
					// Inside a mapped chunk ReadBlock trusts the size it
					// last saw; reading the window is what fails.
					held = append(held, w)
					continue
				}
				if int(blk+n) > nblk || int(blk) >= nblk {
					if !errors.Is(err, ErrRange) {
						t.Fatalf("ReadBlock(%d, %d) of %d blocks = %v, want ErrRange", blk, n, nblk, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("ReadBlock(%d, %d): %v", blk, n, err)
				}
				lo := int(blk) * bs
				if !bytes.Equal(w.Bytes(), ref[lo:min(lo+int(n)*bs, len(ref))]) {
					t.Fatalf("ReadBlock(%d, %d) differs from the reference", blk, n)
				}
				if v%2 == 1 {
					held = append(held, w)
				} else if err := w.Release(); err != nil {
					t.Fatal(err)
				}
			case 2: // WriteBlock, store v at an offset, sync
				blk := int64(a % max(nblk, 1))
				w, err := of.WriteBlock(blk, 1)
				if len(ref) == 0 {
					continue
				}
				if err != nil {
					t.Fatalf("WriteBlock(%d, 1): %v", blk, err)
				}
				i := b * 31 % len(w.Bytes())
				w.Bytes()[i] = v
				ref[int(blk)*bs+i] = v
				if err := w.Sync(i, 1); err != nil {
					t.Fatal(err)
				}
				w.Release()
			case 3: // release the oldest held window, checking it first
				if len(held) == 0 {
					continue
				}
				w := held[0]
				held = held[1:]
				if !truncated {
					if err := w.Read(func(b []byte) {
						if !bytes.Equal(b, ref[w.Offset():int(w.Offset())+len(b)]) {
							t.Fatalf("held window at %d differs from the reference", w.Offset())
						}
					}); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Release(); err != nil {
					t.Fatal(err)
				}
			case 4: // append b bytes of v behind the File's back
				add := bytes.Repeat([]byte{v}, b*13)
				h, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				h.Write(add)
				h.Close()
				ref = append(ref, add...)
			case 5: // truncate to a*61 bytes if shorter
				if n := a * 61; n < len(ref) {
					if err := os.Truncate(path, int64(n)); err != nil {
						t.Fatal(err)
					}
					ref = ref[:n]
					truncated = true
				}
			case 7: // Unmap: held windows are checked when released (3)
				n, err := of.Unmap()
				if err != nil || n < 0 || n%int64(2*bs) != 0 {
					t.Fatalf("Unmap = %d, %v", n, err)
				}
			case 6: // Close must refuse while windows are held
				if len(held) > 0 {
					if err := of.Close(); !errors.Is(err, ErrBusy) {
						t.Fatalf("Close with %d windows held = %v", len(held), err)
					}
				}
			}
		}
		for _, w := range held {
			w.Release()
		}
		if err := of.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, ref) {
			t.Fatalf("the file at the end differs from the reference (%v)", err)
		}
	})
}
