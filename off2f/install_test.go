package off2f_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nvboot/nvboot/off2f"
)

// Install stores the text in every store, once, and writes the header file
// last: when the header cannot be written, the text it added is gone again
// and text that was there before stays.
func TestInstall(t *testing.T) {
	p := testProgs(t)
	raw, err := os.ReadFile(p.bins["c-static"])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b} {
		os.Mkdir(d, 0o755)
	}
	opt := off2f.Options{Loader: p.loader, StoreDir: a}
	hdr := filepath.Join(dir, "prog")
	conv, written, err := off2f.Install(raw, opt, hdr, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 2 || !written[0] || !written[1] {
		t.Errorf("first install: written %v, want [true true]", written)
	}
	for _, d := range []string{a, b} {
		if _, err := os.Stat(filepath.Join(d, conv.TextName())); err != nil {
			t.Error(err)
		}
	}
	if got, err := os.ReadFile(hdr); err != nil || string(got) != string(conv.Header) {
		t.Errorf("header file: %v", err)
	}
	if _, written, err := off2f.Install(raw, opt, hdr, a); err != nil || written[0] {
		t.Errorf("second install: written %v, %v; want the text kept", written, err)
	}

	// The header's directory is missing: a's text stays (it was there),
	// c's new text goes.
	c := filepath.Join(dir, "c")
	os.Mkdir(c, 0o755)
	_, _, err = off2f.Install(raw, opt, filepath.Join(dir, "missing", "prog"), a, c)
	var he *off2f.HeaderError
	if !errors.As(err, &he) {
		t.Fatalf("header in a missing directory: %v, want a HeaderError", err)
	}
	if _, err := os.Stat(filepath.Join(a, conv.TextName())); err != nil {
		t.Errorf("text that was there before: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c, conv.TextName())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("text added by the failed install: %v, want it removed", err)
	}
}
