package off2f_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvboot/nvboot/off2f"
)

// fakeText makes size bytes of incompressible content and a hash-shaped name;
// the store checks names, not contents.
func fakeText(t testing.TB, size int, seed byte) (string, []byte) {
	t.Helper()
	text := make([]byte, size)
	rand.New(rand.NewSource(int64(seed))).Read(text)
	sum := sha256.Sum256(text)
	return hex.EncodeToString(sum[:]), text
}

// A full filesystem must leave the store as it was: no partial file, no temp.
func TestStorePutFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a small tmpfs (need root): %v", err)
	}
	defer syscall.Unmount(dir, 0)
	name, text := fakeText(t, 4<<20, 1)
	// An old, complete file under the same name must survive a failed rewrite.
	old := []byte("old contents")
	if err := os.WriteFile(filepath.Join(dir, name), old, 0o444); err != nil {
		t.Fatal(err)
	}
	_, err := off2f.Store{Dir: dir}.Put(name, text)
	if err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Put on a full disk: got %v, want ENOSPC", err)
	}
	if !strings.Contains(err.Error(), name) {
		t.Errorf("error does not name the file: %v", err)
	}
	if got := mustRead(t, filepath.Join(dir, name)); !bytes.Equal(got, old) {
		t.Errorf("old file changed to %d bytes", len(got))
	}
	des, _ := os.ReadDir(dir)
	if len(des) != 1 {
		t.Errorf("store holds %d entries after a failed write, want the 1 old file", len(des))
	}
}

// SIGKILL at random moments of a write: the name holds nothing or the whole file.
func TestStorePutKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	if os.Getenv("OFF2F_PUT_CHILD") != "" {
		// Rewrite one name with two contents in turn: after a kill the name must
		// hold one of them whole, or nothing before the first rename.
		name, a := fakeText(t, 16<<20, 7)
		_, b := fakeText(t, 16<<20, 8)
		path := filepath.Join(os.Getenv("OFF2F_PUT_CHILD"), name)
		os.Stdout.WriteString("writing\n")
		for i := 0; ; i++ {
			if err := off2f.WriteFileAtomic(path, [][]byte{a, b}[i%2], 0o444); err != nil {
				t.Fatal(err)
			}
		}
	}
	name, text := fakeText(t, 16<<20, 7)
	_, other := fakeText(t, 16<<20, 8)
	complete, absent := 0, 0
	for i := 0; i < 8; i++ {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestStorePutKilled$")
		cmd.Env = append(os.Environ(), "OFF2F_PUT_CHILD="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "writing\n" {
			cmd.Process.Kill()
			t.Fatalf("child said %q", line)
		}
		time.Sleep(time.Duration(i*60) * time.Millisecond) // spread the kills; no assertion on time
		cmd.Process.Kill()
		cmd.Wait()
		got, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case errors.Is(err, os.ErrNotExist):
			absent++
		case err != nil:
			t.Fatal(err)
		case bytes.Equal(got, text), bytes.Equal(got, other):
			complete++
		default:
			t.Fatalf("kill %d left a partial or mixed file of %d bytes (want one whole version)", i, len(got))
		}
		entries, err := off2f.Store{Dir: dir}.List()
		if err != nil || len(entries) > 1 || (len(entries) == 1 && entries[0].Name != name) {
			t.Fatalf("store lists %v %v", entries, err)
		}
		// gc removes leftovers of interrupted writes.
		m := filepath.Join(t.TempDir(), "MANIFEST")
		off2f.WriteManifest(m, []string{name})
		if _, err := (off2f.Store{Dir: dir}).GC([]string{m}); err != nil {
			t.Fatal(err)
		}
		if tmps, _ := filepath.Glob(filepath.Join(dir, ".*")); len(tmps) != 0 {
			t.Errorf("gc left %v", tmps)
		}
	}
	t.Logf("complete %d, absent %d", complete, absent)
}

func TestStoreGC(t *testing.T) {
	dir := t.TempDir()
	st := off2f.Store{Dir: dir}
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, n := range []string{a, b} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("# keep a\n"+a+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "README"), []byte("not text"), 0o644)
	if _, err := st.GC(nil); err == nil {
		t.Fatal("gc without a manifest must refuse")
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("nothex\n"), 0o644)
	if _, err := st.GC([]string{bad}); err == nil || !strings.Contains(err.Error(), bad+":1") {
		t.Fatalf("bad manifest: %v", err)
	}
	removed, err := st.GC([]string{filepath.Join(dir, "MANIFEST")})
	if err != nil || len(removed) != 1 || removed[0].Name != b {
		t.Fatalf("removed %v, %v", removed, err)
	}
	for _, keep := range []string{a, "MANIFEST", "README"} {
		if _, err := os.Stat(filepath.Join(dir, keep)); err != nil {
			t.Errorf("gc removed %s", keep)
		}
	}
}

func TestStorePutRejectsBadName(t *testing.T) {
	if _, err := (off2f.Store{Dir: t.TempDir()}).Put("../evil", []byte("x")); err == nil {
		t.Fatal("a name that is not a hash was accepted")
	}
}
