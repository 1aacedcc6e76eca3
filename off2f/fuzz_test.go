package off2f_test

import (
	"bytes"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/off2f"
)

// The corpus in testdata/fuzz holds real header files, text header pages and
// small executables (made by gen_corpus_test.go) plus what fuzzing found.

func FuzzParseHeader(f *testing.F) {
	f.Add([]byte("\x7fELF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := off2f.ParseHeader(b)
		if err != nil {
			return
		}
		// A header that parses must describe a note that survives a round trip.
		desc, err := h.Note.MarshalBinary()
		if err != nil {
			t.Fatalf("parsed note does not encode: %v", err)
		}
		var n off2f.Note
		if err := n.UnmarshalBinary(desc); err != nil {
			t.Fatalf("re-encoded note does not parse: %v", err)
		}
	})
}

func FuzzParseText(f *testing.F) {
	f.Add(append([]byte("OFF2FTXT"), make([]byte, 4096)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		var th off2f.TextHeader
		if err := th.UnmarshalBinary(b); err != nil {
			return
		}
		for _, s := range th.Segments {
			if s.Offset+s.Memsz > th.Size {
				t.Fatalf("accepted a segment past the end: %+v", s)
			}
		}
		off2f.ParseText(b) // must not panic
	})
}

func FuzzConvert(f *testing.F) {
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		conv, err := off2f.Convert(b, off2f.Options{})
		if err != nil {
			return
		}
		// Whatever converts must give a header the loader's checks accept, a text
		// that hashes right, and an unpack with the same loadable bytes.
		h, err := off2f.ParseHeader(conv.Header)
		if err != nil {
			t.Fatalf("converted header does not parse: %v", err)
		}
		th, err := off2f.ParseText(conv.Text)
		if err != nil {
			t.Fatalf("converted text does not parse: %v", err)
		}
		if err := h.CheckText(th); err != nil {
			t.Fatal(err)
		}
		if _, err := off2f.Unpack(conv.Header, conv.Text); err != nil && !bytes.Contains([]byte(err.Error()), []byte("ELF header")) {
			t.Fatalf("unpack of a fresh conversion: %v", err)
		}
	})
}

// A store's MANIFEST is read from a device at every boot: whatever it holds
// parses to an error or to a set of hashes that writes back to the same set.
func FuzzParseManifest(f *testing.F) {
	h := strings.Repeat("ab", 32)
	f.Add([]byte(h + "\n# comment\n\n" + strings.Repeat("01", 32) + "\r\n"))
	f.Add([]byte(h))
	f.Add([]byte(strings.Repeat("x", 70000)))
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := off2f.ParseManifest("fuzz", b)
		if err != nil {
			return
		}
		var hashes []string
		for k := range set {
			hashes = append(hashes, k)
		}
		p := filepath.Join(t.TempDir(), "MANIFEST")
		if err := off2f.WriteManifest(p, hashes); err != nil {
			t.Fatalf("a parsed hash does not write: %v", err)
		}
		again, err := off2f.ReadManifest(p)
		if err != nil || !maps.Equal(again, set) {
			t.Fatalf("round trip: %v, %v != %v", err, again, set)
		}
	})
}

// A line of any length is judged: a long one is an error, not the end of the
// manifest (bufio.Scanner used to stop there silently).
func TestParseManifestLongLine(t *testing.T) {
	h := strings.Repeat("ab", 32)
	_, err := off2f.ParseManifest("m", []byte(h+"\n"+strings.Repeat("x", 70000)+"\n"+h+"\n"))
	if err == nil || !strings.Contains(err.Error(), "m:2") {
		t.Fatalf("err = %v, want one naming line 2", err)
	}
}
