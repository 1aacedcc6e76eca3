// Package textstore makes text stores for tests of what runs on one:
// nvinit's deploys and repairs, the update endpoint's store.
package textstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/off2f"
)

// ImageText is the made-up hash Seed stores the image's own text under
// (what gc keeps checks only a text's magic, not its hash).
var ImageText = strings.Repeat("a", 64)

// Seed converts the program bin into dir's text store and stores its text
// as the image's own, listed in the MANIFEST: a store as a build leaves it.
func Seed(t testing.TB, dir string, bin []byte) *off2f.Converted {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conv, err := off2f.Convert(bin, off2f.Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (off2f.Store{Dir: dir}).Put(ImageText, conv.Text); err != nil {
		t.Fatal(err)
	}
	if err := off2f.WriteManifest(filepath.Join(dir, off2f.ManifestName), []string{ImageText}); err != nil {
		t.Fatal(err)
	}
	return conv
}

// Note is the OFF2F note of the program file at path.
func Note(t testing.TB, path string) off2f.Note {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := off2f.ParseHeader(raw)
	if err != nil {
		t.Fatal(err)
	}
	return h.Note
}
