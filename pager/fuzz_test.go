package pager

import (
	"testing"
)

// FuzzAccess runs an access sequence decoded from the input on a region
// with a budget of 8 pages and on an in-memory copy: every byte read must
// equal the copy's, and after Sync, Close and a new Map the whole region
// must too. Each operation is 3 bytes: kind, and a 16-bit position.
func FuzzAccess(f *testing.F) {
	f.Add(byte(1), []byte{0, 0, 1, 1, 0, 40, 2, 0, 0, 0, 1, 0})
	f.Add(byte(2), []byte{1, 9, 9, 3, 0, 0, 0, 9, 9, 1, 200, 1})
	f.Add(byte(3), []byte{1, 255, 255, 1, 0, 0, 4, 0, 0, 0, 255, 255})
	f.Fuzz(func(t *testing.T, hint byte, ops []byte) {
		if len(ops) > 3*200 {
			return
		}
		s := Shape{Rows: 48, Cols: 100, Elem: 8} // 37.5 KiB: rows cross pages
		h := Hint{Order: Order(hint%3 + 1)}
		if h.Order == Tiled {
			h.TileRows, h.TileCols = 1+int(hint)%7, 1+int(hint)%13
		}
		c := Config{Budget: 8 * int64(pageSize), RunPages: 1 + int(hint)%3, NoUffd: hint >= 128}
		p, r, want := mapped(t, c, s, h)
		path := r.path
		var err error
		for ; len(ops) >= 3; ops = ops[3:] {
			pos := (int(ops[1])<<8 | int(ops[2])) * 7 % len(want)
			b := r.Bytes()
			switch ops[0] % 4 {
			case 0, 1: // read a 64-byte stretch, or a column of 8 elements
				if ops[0]%4 == 0 {
					end := min(pos+64, len(want))
					if !equal(b[pos:end], want[pos:end]) {
						t.Fatalf("bytes %d..%d differ", pos, end)
					}
					continue
				}
				for k := pos; k < len(want) && k < pos+8*s.Cols*s.Elem; k += s.Cols * s.Elem {
					if b[k] != want[k] {
						t.Fatalf("byte %d differs", k)
					}
				}
			case 2: // write
				b[pos] = ops[1] ^ ops[2]
				want[pos] = ops[1] ^ ops[2]
			case 3: // Sync
				if err := p.Sync(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if p, err = New(c); err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if r, err = p.Map(path); err != nil {
			t.Fatal(err)
		}
		if !equal(r.Bytes(), want) {
			t.Fatal("the region after Close and a new Map differs")
		}
	})
}
