package off2f_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/off2f"
)

// WithFallbackDir names a fallback directory in a header converted
// without one, changing nothing but that field: the loader then runs the
// program from the copy there when the store's text is gone.
func TestWithFallbackDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real programs")
	}
	p := testProgs(t)
	dir := t.TempDir()
	hdr, conv := p.convertInto(t, "go-probe", filepath.Join(dir, "bin"), off2f.Options{StoreDir: filepath.Join(dir, "store")})
	clean := filepath.Join(dir, "clean")
	os.MkdirAll(clean, 0o755)
	if _, err := (off2f.Store{Dir: clean}).Put(conv.TextName(), conv.Text); err != nil {
		t.Fatal(err)
	}
	raw := mustRead(t, hdr)
	out, err := off2f.WithFallbackDir(raw, clean)
	if err != nil {
		t.Fatal(err)
	}
	h, err := off2f.ParseHeader(out)
	if err != nil {
		t.Fatalf("the rewritten header does not parse: %v", err)
	}
	want := conv.Note
	want.FallbackDir = clean
	if h.Note.FallbackDir != clean || h.Note.StoreDir != want.StoreDir || h.Note.Hash != want.Hash || len(h.Note.Segments) != len(want.Segments) {
		t.Errorf("note after the rewrite: %+v, want %+v", h.Note, want)
	}
	// Only the fallback field (192 bytes into the note, 128 long) changed.
	off, _ := noteDesc(t, raw)
	if len(out) != len(raw) || !bytes.Equal(out[:off+192], raw[:off+192]) || !bytes.Equal(out[off+320:], raw[off+320:]) {
		t.Error("the rewrite changed bytes outside the note's fallback directory")
	}
	if again, err := off2f.WithFallbackDir(out, ""); err != nil || !bytes.Equal(again, raw) {
		t.Errorf("naming no fallback again: %v; want the original bytes back", err)
	}
	if _, err := off2f.WithFallbackDir(raw, "relative/dir"); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("a relative directory: %v, want refused", err)
	}
	if _, err := off2f.WithFallbackDir([]byte("not a header"), clean); err == nil {
		t.Error("a non-header was rewritten")
	}

	if err := os.WriteFile(hdr, out, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRemove(t, filepath.Join(dir, "store", conv.TextName()))
	if got := run(t, hdr, []string{"ok"}, nil); got.Exit != 0 || !strings.Contains(got.Stdout, "goroutines_sum=42673008000") {
		t.Fatalf("run from the named fallback: %+v", got)
	}
}
