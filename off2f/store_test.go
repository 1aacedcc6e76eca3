package off2f_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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

// textLike writes a file that starts as a text file does, named name.
func textLike(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), append(off2f.TextMagic[:], name...), 0o444); err != nil {
		t.Fatal(err)
	}
}

func TestStoreGC(t *testing.T) {
	dir := t.TempDir()
	st := off2f.Store{Dir: dir}
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	textLike(t, dir, a)
	textLike(t, dir, b)
	leftovers := []string{"." + b + ".off2f-tmp-0123456789abcdef", ".MANIFEST.off2f-tmp-fedcba9876543210", "." + a + ".off2f-tmp-00000000000000ff"}
	for _, l := range leftovers {
		os.WriteFile(filepath.Join(dir, l), []byte("partial"), 0o600)
	}
	os.Mkdir(filepath.Join(dir, "lost+found"), 0o700)
	os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("# keep a\n"+a+"\n"), 0o644)
	if _, err := st.GC(nil); err == nil {
		t.Fatal("gc without a manifest must refuse")
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("nothex\n"), 0o644)
	if _, err := st.GC([]string{bad}); err == nil || !strings.Contains(err.Error(), bad+":1") {
		t.Fatalf("bad manifest: %v", err)
	}
	removed, err := st.GC([]string{filepath.Join(dir, "MANIFEST")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range removed {
		got = append(got, fmt.Sprintf("%s %v", e.Name, e.Leftover))
	}
	sort.Strings(got)
	want := []string{leftovers[2] + " true", leftovers[1] + " true", leftovers[0] + " true", b + " false"}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("removed:\n%s\nwant (every file, leftovers too):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	des, _ := os.ReadDir(dir)
	var left []string
	for _, de := range des {
		left = append(left, de.Name())
	}
	if strings.Join(left, " ") != "MANIFEST "+a+" lost+found" {
		t.Errorf("the store holds %v after gc, want %s, MANIFEST, lost+found", left, a)
	}
}

// gc on what is not a store, or with a manifest that cannot be right, removes
// nothing and says which input is wrong.
func TestStoreGCRefuses(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	manifest := func(body string) string {
		p := filepath.Join(t.TempDir(), "MANIFEST")
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	for _, tc := range []struct {
		name     string
		files    []string // textLike files; other names get "x"
		manifest string
		want     string // in the error; "%d" stands for the directory
	}{
		{"not a store", []string{a, ".env.tmpl"}, manifest(a + "\n"), "%d/.env.tmpl is not a text file"},
		{"a README", []string{a, b, "README"}, manifest(a + "\n"), "%d/README is not a text file"},
		{"temp-like name of another file", []string{a, ".b.off2f-tmp-0123456789abcdef"}, manifest(a + "\n"), ".b.off2f-tmp-0123456789abcdef is not a text file"},
		{"empty manifest", []string{a, b}, manifest(""), "lists no text hash"},
		{"manifest of comments", []string{a, b}, manifest("# cut\n"), "lists no text hash"},
		{"manifest of another store", []string{a, b}, manifest(strings.Repeat("c", 64) + "\n"), "none of its 2 text files is listed"},
		{"hash-named file that is not text", []string{a, "!" + b}, manifest(a + "\n"), "%d/" + b + " is named like a text file but is not one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				if name, ok := strings.CutPrefix(f, "!"); ok || !strings.HasPrefix(f, ".") && len(f) != 64 {
					os.WriteFile(filepath.Join(dir, name), []byte("not text"), 0o644)
				} else {
					textLike(t, dir, f)
				}
			}
			before, _ := os.ReadDir(dir)
			removed, err := off2f.Store{Dir: dir}.GC([]string{tc.manifest})
			want := strings.ReplaceAll(tc.want, "%d", dir)
			if err == nil || !strings.Contains(err.Error(), want) || len(removed) != 0 {
				t.Fatalf("gc: removed %v, error %v; want an error with %q", removed, err, want)
			}
			if strings.Contains(tc.want, "manifest") || strings.Contains(tc.name, "manifest") {
				if !strings.Contains(err.Error(), tc.manifest) {
					t.Errorf("error does not name the manifest %s: %v", tc.manifest, err)
				}
			}
			if after, _ := os.ReadDir(dir); len(after) != len(before) {
				t.Errorf("gc removed %d files although it refused", len(before)-len(after))
			}
		})
	}
}

// The temporary files the writer makes are exactly the leftovers gc removes.
func TestWriteFileAtomicLeftoverNames(t *testing.T) {
	for _, name := range []string{
		"." + strings.Repeat("a", 64) + ".off2f-tmp-0123456789abcdef",
		".MANIFEST.off2f-tmp-0123456789abcdef",
	} {
		if !off2f.IsLeftover(name) {
			t.Errorf("IsLeftover(%q) = false", name)
		}
	}
	for _, name := range []string{
		".env.tmpl", ".env.tmp", ".x.tmp123", ".MANIFEST.tmp", "." + strings.Repeat("a", 64) + ".tmpl",
		"." + strings.Repeat("a", 64) + ".tmp4294967295", // os.CreateTemp's names: not this writer's
		"." + strings.Repeat("a", 64) + ".off2f-tmp-0123", "." + strings.Repeat("A", 64) + ".tmp1",
		".MANIFEST.off2f-tmp-0123456789ABCDEF", "MANIFEST.off2f-tmp-0123456789abcdef", strings.Repeat("a", 64),
	} {
		if off2f.IsLeftover(name) {
			t.Errorf("IsLeftover(%q) = true", name)
		}
	}
}

// WriteFileAtomic's errors name the path asked for, never a temporary file,
// and leave nothing behind.
func TestWriteFileAtomicErrors(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "d"), dir + "/d: it is a directory"},
		{filepath.Join(dir, "missing", "f"), "directory " + dir + "/missing does not exist"},
	} {
		err := off2f.WriteFileAtomic(tc.path, []byte("x"), 0o644)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "off2f-tmp") {
			t.Errorf("WriteFileAtomic(%s): %v, want %q", tc.path, err, tc.want)
		}
	}
	if des, _ := os.ReadDir(dir); len(des) != 1 {
		t.Errorf("%d entries left in %s", len(des), dir)
	}
}

func TestStorePutRejectsBadName(t *testing.T) {
	if _, err := (off2f.Store{Dir: t.TempDir()}).Put("../evil", []byte("x")); err == nil {
		t.Fatal("a name that is not a hash was accepted")
	}
}

// machineText is a text file for machine m: a header page naming it.
func machineText(t *testing.T, m off2f.Machine, vaddr uint64) (string, []byte) {
	t.Helper()
	segs := []off2f.Segment{{Vaddr: vaddr, Memsz: off2f.PageSize, Filesz: off2f.PageSize, Offset: off2f.PageSize, Prot: off2f.ProtRead | off2f.ProtExec}}
	contents := [][]byte{make([]byte, off2f.PageSize)}
	th := off2f.TextHeader{Version: off2f.Version, Machine: m, Size: 2 * off2f.PageSize, OrigPhdr: vaddr + 64, OrigPhnum: 1, Segments: segs,
		Hash: off2f.TextHash(m, 0, vaddr+64, 1, segs, contents)}
	page, err := th.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return off2f.HashName(th.Hash), append(page, contents[0]...)
}

// A store holds one machine's texts: Put refuses another machine's, names
// both, and writes nothing; the same machine's next text goes in.
func TestStorePutRefusesOtherMachine(t *testing.T) {
	dir := t.TempDir()
	s := off2f.Store{Dir: dir}
	n1, t1 := machineText(t, off2f.MachineARM64, 0x10000)
	if _, err := s.Put(n1, t1); err != nil {
		t.Fatal(err)
	}
	n2, t2 := machineText(t, off2f.MachineAMD64, 0x400000)
	_, err := s.Put(n2, t2)
	if err == nil || !strings.Contains(err.Error(), "holds aarch64 texts ("+n1+"), this text "+n2+" is for x86-64") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, n2)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused text was written: %v", err)
	}
	n3, t3 := machineText(t, off2f.MachineARM64, 0x20000)
	if written, err := s.Put(n3, t3); err != nil || !written {
		t.Fatalf("another aarch64 text: written %v, %v", written, err)
	}
	if n1 == n3 {
		t.Fatal("two texts with one name")
	}
}
