package off2f_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/nvboot/nvboot/off2f"
)

// The hashed form of every kind of program's text hashes to the text's
// store name, and gives the text file back byte for byte.
func TestHashedTextRoundTrip(t *testing.T) {
	p := testProgs(t)
	for _, name := range []string{"go-probe", "go-probe-R", "go-probe-pie", "c-static", "c-static-pie", "tiny", "busybox"} {
		t.Run(name, func(t *testing.T) {
			_, conv := p.convertInto(t, name, t.TempDir(), off2f.Options{})
			h, nseg, err := off2f.HashedText(conv.Text)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(h); hex.EncodeToString(sum[:]) != conv.TextName() {
				t.Fatalf("sha256 of the hashed form %x, the text's name %s", sum, conv.TextName())
			}
			if nseg != len(conv.Note.Segments) {
				t.Errorf("%d segments, the note has %d", nseg, len(conv.Note.Segments))
			}
			if len(h) >= len(conv.Text) {
				t.Errorf("hashed form %d bytes, the text file %d: want it smaller (no header page, no padding)", len(h), len(conv.Text))
			}
			back, err := off2f.TextFromHashed(h, nseg)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, conv.Text) {
				t.Fatalf("text made back differs from the converted one (%d bytes, want %d)", len(back), len(conv.Text))
			}
		})
	}
}

// tinyHashed is the hashed form of a one-segment text: 64 bytes of r-x at
// 0x401000, the original program headers at its start.
func tinyHashed() []byte {
	b := make([]byte, 16+off2f.SegmentSize+64)
	le := binary.LittleEndian
	le.PutUint64(b[0:], 0x401000)
	le.PutUint32(b[8:], 1)
	le.PutUint16(b[12:], uint16(off2f.MachineAMD64))
	s := b[16:]
	le.PutUint64(s[0:], 0x401000)
	le.PutUint64(s[8:], 64)
	le.PutUint64(s[16:], 64)
	le.PutUint64(s[24:], off2f.TextHeaderSize)
	le.PutUint32(s[32:], off2f.ProtRead|off2f.ProtExec)
	for i := range 64 {
		b[16+off2f.SegmentSize+i] = byte(i)
	}
	return b
}

// What a registry serves is outside input: each way a hashed form can be
// wrong is refused, saying what.
func TestTextFromHashedRejects(t *testing.T) {
	good := tinyHashed()
	if _, err := off2f.TextFromHashed(good, 1); err != nil {
		t.Fatalf("the good one: %v", err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, c := range []struct {
		name string
		h    []byte
		nseg int
		want string
	}{
		{"no segments", good, 0, "0 segments"},
		{"too many segments", good, 17, "17 segments"},
		{"more segments than bytes", good, 2, "segment 1"}, // the second entry reads segment bytes
		{"short table", good[:40], 1, "shorter than"},
		{"cut short", good[:len(good)-1], 1, "only 63 are left"},
		{"bytes after", append(bytes.Clone(good), 0), 1, "1 bytes after"},
		{"unknown flag", edit(func(b []byte) []byte { b[14] = 1; return b }), 1, "only FlagHugeSpan"},
		// A span flag on a text whose segment cannot take a span there.
		{"span", edit(func(b []byte) []byte { b[14] = byte(off2f.FlagHugeSpan); return b }), 1, "layout puts it at"},
		{"machine", edit(func(b []byte) []byte { b[12] = 99; return b }), 1, "does not know"},
		{"offset", edit(func(b []byte) []byte { b[16+24+1] = 0x20; return b }), 1, "layout puts it at 0x1000"},
		{"phdrs outside", edit(func(b []byte) []byte { b[1] = 0x20; return b }), 1, "not inside a text segment"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := off2f.TextFromHashed(c.h, c.nseg)
			if err == nil || !errors.Is(err, off2f.ErrFormat) || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
				t.Fatalf("err = %v, want ErrFormat saying %q", err, c.want)
			}
		})
	}
}

// Whatever TextFromHashed accepts is a text file that parses whole and is
// named by the hashed form's SHA-256.
func FuzzTextFromHashed(f *testing.F) {
	f.Add(tinyHashed(), 1)
	f.Add(tinyHashed(), 2)
	f.Fuzz(func(t *testing.T, h []byte, nseg int) {
		text, err := off2f.TextFromHashed(h, nseg)
		if err != nil {
			return
		}
		th, err := off2f.ParseText(text)
		if err != nil {
			t.Fatalf("accepted a text that does not parse: %v", err)
		}
		if th.Hash != sha256.Sum256(h) {
			t.Fatalf("text hash %x, sha256 of its hashed form %x", th.Hash, sha256.Sum256(h))
		}
		again, n, err := off2f.HashedText(text)
		if err != nil || n != nseg || !bytes.Equal(again, h) {
			t.Fatalf("round trip: %v, %d segments, equal %v", err, n, bytes.Equal(again, h))
		}
	})
}
