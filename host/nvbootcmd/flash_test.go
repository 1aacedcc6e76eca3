package nvbootcmd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/format/gpt"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/internal/cli"
)

// testImage makes an image directory with a disk image, as nvboot build does,
// and a pmem state image beside it.
func testImage(t *testing.T, dir string) string {
	t.Helper()
	img := filepath.Join(dir, "img")
	os.Mkdir(img, 0o755)
	os.WriteFile(filepath.Join(img, outdir.ManifestFile), []byte(`{"Layout":"off2f"}`), 0o644)
	part := filepath.Join(dir, "part")
	os.WriteFile(part, bytes.Repeat([]byte("nvboot"), 200000), 0o644)
	if _, err := gpt.Write(filepath.Join(img, outdir.DiskFile), "t", []gpt.Partition{{Name: "root", Type: gpt.TypeLinuxData, Src: part}}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(img, outdir.StatePmemFile), bytes.Repeat([]byte("state"), 100000), 0o644)
	return img
}

// TestFlashNewFile runs the -h example: 'nvboot flash out/demo card.img'
// with no card.img yet.
func TestFlashNewFile(t *testing.T) {
	dir := t.TempDir()
	img := testImage(t, dir)
	target := filepath.Join(dir, "card.img")
	if _, stderr, err := execute("flash", img, target); err != nil {
		t.Fatalf("nvboot flash onto a new file: %v\n%s", err, stderr)
	} else if !strings.Contains(stderr, target+": new regular file") {
		t.Errorf("the target is not described as new:\n%s", stderr)
	}
	head := make([]byte, 520)
	f, err := os.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	f.ReadAt(head, 0)
	f.Close()
	if string(head[512:]) != "EFI PART" {
		t.Error("no GPT on the new file")
	}
	// Flashing again over the earlier flash needs no -yes either.
	if _, stderr, err := execute("flash", img, target); err != nil {
		t.Fatalf("nvboot flash over an earlier flash: %v\n%s", err, stderr)
	}
}

// TestFlashKeepsFiles: a file that is not a disk image is not overwritten
// without -yes, and an image directory's own files not even with it.
func TestFlashKeepsFiles(t *testing.T) {
	dir := t.TempDir()
	img := testImage(t, dir)
	notes := filepath.Join(dir, "notes.txt")
	os.WriteFile(notes, []byte("do not lose these notes\n"), 0o644)
	_, _, err := execute("flash", img, notes)
	if err == nil || errors.Is(err, cli.ErrUsage) {
		t.Fatalf("flash onto notes.txt: err %v, want a refusal", err)
	}
	for _, want := range []string{notes, "24 bytes", "not a disk image", "-yes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if b, _ := os.ReadFile(notes); string(b) != "do not lose these notes\n" {
		t.Error("the refused flash changed notes.txt")
	}
	if _, stderr, err := execute("flash", "-yes", img, notes); err != nil {
		t.Errorf("flash -yes onto notes.txt: %v\n%s", err, stderr)
	}

	state := filepath.Join(img, outdir.StatePmemFile)
	before, _ := os.ReadFile(state)
	for _, args := range [][]string{{"flash", img, state}, {"flash", "-yes", img, state}} {
		if _, _, err := execute(args...); err == nil || !strings.Contains(err.Error(), "image directory") {
			t.Errorf("nvboot %q: err %v, want a refusal naming the image directory", args, err)
		}
	}
	if after, _ := os.ReadFile(state); !bytes.Equal(after, before) {
		t.Error("the image's pmem-state.img changed")
	}
}
