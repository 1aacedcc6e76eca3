package initramfs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func sample(t *testing.T) *Archive {
	t.Helper()
	a := New()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.File("etc/motd", 0o644, []byte("hello\n")))
	must(a.File("/bin/odd", 0o755, []byte("12345"))) // lengths that need padding
	must(a.Symlink("bin/sh", "odd"))
	must(a.Dir("proc", 0o555))
	must(a.CharDev("dev/console", 0o600, 5, 1))
	return a
}

// TestCpioReadsIt checks the archive with GNU cpio, an independent reader.
func TestCpioReadsIt(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("cpio not installed")
	}
	b := sample(t).Bytes()
	if len(b)%4 != 0 {
		t.Errorf("archive length %d not a multiple of 4", len(b))
	}
	cmd := exec.Command("cpio", "-itv", "--quiet")
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -it: %v\n%s", err, out)
	}
	for _, want := range []string{"bin/odd", "bin/sh -> odd", "etc/motd", "dev/console", "proc"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("cpio listing lacks %q:\n%s", want, out)
		}
	}
	if os.Geteuid() != 0 {
		return
	}
	dir := t.TempDir()
	cmd = exec.Command("cpio", "-idm", "--quiet", "--no-absolute-filenames")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(b)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -id: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "bin/sh")); string(got) != "12345" {
		t.Errorf("bin/sh (through the symlink) = %q", got)
	}
	st, err := os.Stat(filepath.Join(dir, "bin/odd"))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("bin/odd: %v %v", st, err)
	}
}

func TestReproducible(t *testing.T) {
	a, b := sample(t).Bytes(), sample(t).Bytes()
	if !bytes.Equal(a, b) {
		t.Error("two archives of the same inputs differ")
	}
}

func TestRejects(t *testing.T) {
	a := New()
	if err := a.File("x", 0o644, nil); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"twice":          a.File("x", 0o644, nil),
		"under a file":   a.File("x/y", 0o644, nil),
		"root":           a.File("/", 0o644, nil),
		"empty symlink":  a.Symlink("l", ""),
		"missing source": a.CopyFile("m", "/nonexistent/file"),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
