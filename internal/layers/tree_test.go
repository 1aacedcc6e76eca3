package layers

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoTrackedBinaries: build outputs stay out of git (.gitignore); an ELF
// committed by a stray `go build` at the root fails here, not in review.
func TestNoTrackedBinaries(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := filepath.Join("..", "..")
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 100 {
		t.Fatalf("git ls-files listed %d files: is it looking at the checkout?", len(files))
	}
	for _, f := range files {
		b := make([]byte, 4)
		fd, err := os.Open(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the work tree, not yet in the index
		}
		n, _ := fd.Read(b)
		fd.Close()
		if bytes.Equal(b[:n], []byte("\x7fELF")) {
			t.Errorf("%s is an ELF binary tracked by git: build outputs are ignored (.gitignore), never committed; git rm --cached it", f)
		}
	}
}
