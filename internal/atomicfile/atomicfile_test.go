package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A File written in place and committed replaces the old file whole, with
// the mode asked for; one aborted leaves the old file and no temporary one.
func TestCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "disk.img")
	os.WriteFile(path, []byte("old"), 0o644)

	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(1 << 20)
	f.WriteAt([]byte("head"), 0)
	f.Abort()
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("after Abort: %q, want the old file", got)
	}

	f, err = Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort() // a no-op after Commit
	f.WriteAt([]byte("new"), 0)
	if err := f.Commit(0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "new" {
		t.Errorf("after Commit: %q", got)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if des, _ := os.ReadDir(dir); len(des) != 1 {
		t.Errorf("%d entries in %s, want the file alone", len(des), dir)
	}
}

// WriteFile leaves zero pages as holes, and its temporary files are what
// IsTemp recognises.
func TestWriteFileSparse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "text")
	data := make([]byte, 64*page)
	copy(data, "header")
	data[len(data)-1] = 1
	if err := WriteFile(path, data, 0o444); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 >= int64(len(data)) {
		t.Errorf("%d bytes allocated for %d with 62 zero pages: no holes", st.Blocks*512, len(data))
	}
	isText := func(b string) bool { return b == "text" }
	if !IsTemp(".text"+TempMark+"0123456789abcdef", isText) || IsTemp(".other"+TempMark+"0123456789abcdef", isText) ||
		IsTemp(".text"+TempMark+"0123", isText) {
		t.Error("IsTemp")
	}
}

// Errors name the path asked for, never a temporary file.
func TestCreateErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ path, want string }{
		{dir, dir + ": it is a directory"},
		{filepath.Join(dir, "missing", "f"), "directory " + dir + "/missing does not exist"},
	} {
		_, err := Create(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), TempMark) {
			t.Errorf("Create(%s): %v, want %q", tc.path, err, tc.want)
		}
	}
}
