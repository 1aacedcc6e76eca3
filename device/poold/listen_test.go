package poold

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/pool"
)

// Listen refuses a path holding anything but a socket, and leaves it as it
// was: a regular file, an empty directory, a symbolic link.
func TestListenNotASocket(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("data"), 0o644)
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	link := filepath.Join(dir, "link")
	os.Symlink(file, link)
	for _, path := range []string{file, empty, link} {
		ln, err := Listen(path)
		if err == nil {
			ln.Close()
			t.Errorf("%s: listening", path)
			continue
		}
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a socket") {
			t.Errorf("%s: %v, want it named and \"not a socket\"", path, err)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "data" {
		t.Errorf("the regular file: %q, %v", b, err)
	}
	if fi, err := os.Stat(empty); err != nil || !fi.IsDir() {
		t.Errorf("the directory: %v", err)
	}
	if target, err := os.Readlink(link); err != nil || target != file {
		t.Errorf("the link: %q, %v", target, err)
	}
}

// A socket another poold accepts on is in use: a second Listen fails and
// the first keeps its socket, before and after. A stale socket (nothing
// accepts on it) is replaced.
func TestListenLiveAndStale(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "poold.sock")
	_, stop, err := Start(&contract.PooldConfig{Socket: sock}, Options{NoTicker: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(sock)
	if err == nil {
		ln.Close()
		stop()
		t.Fatal("a second Listen on a live socket succeeded")
	}
	if !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "in use by another poold") {
		t.Errorf("second Listen: %v", err)
	}
	if _, err := (&pool.Client{Socket: sock}).Stats(context.Background()); err != nil {
		t.Errorf("the first poold after the second's attempt: %v", err)
	}
	stop()
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind by stop: %v", err)
	}

	// A stale socket: bound, then its listener closed without removing it.
	stale, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatal(err)
	}
	ln, err = Listen(sock)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	ln.Close()

	// A live socket of another type (some other daemon's stream socket).
	other, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if ln, err := Listen(sock); err == nil {
		ln.Close()
		t.Error("Listen took over another program's stream socket")
	} else if !strings.Contains(err.Error(), "in use") {
		t.Errorf("another program's socket: %v", err)
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("the other program's socket is gone: %v", err)
	}
}

// Close removes the socket only while it is still the one Listen made: a
// socket made at the path since (the file removed and made anew) is left.
func TestListenCloseRemovesOnlyOurs(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "poold.sock")
	first, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(sock)
	second, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	first.Close()
	c, err := net.Dial("unixpacket", sock)
	if err != nil {
		t.Fatalf("the second socket after the first's Close: %v", err)
	}
	c.Close()
	second.Close()
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

// The command: a second poold on the socket of a running one fails at
// once and the first serves on; -socket at a regular file fails and the
// file stays.
func TestExecuteSocketInUse(t *testing.T) {
	dir := t.TempDir()
	cfgPath, sock := filepath.Join(dir, "poold.json"), filepath.Join(dir, "poold.sock")
	writeConfig(t, cfgPath, &contract.PooldConfig{Socket: sock, Programs: []contract.Program{selfProgram(t, "child", 1)}})
	_, stop, err := Start(&contract.PooldConfig{Socket: sock, Programs: []contract.Program{selfProgram(t, "child", 1)}}, Options{NoTicker: true})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	err = Execute(context.Background(), &cli.Context{Stdout: io.Discard, Stderr: io.Discard, Args: []string{"-config", cfgPath}})
	if err == nil || !strings.Contains(err.Error(), "in use by another poold") {
		t.Fatalf("second poold: %v", err)
	}
	spawnReport(t, sock)

	file := filepath.Join(dir, "notes.txt")
	os.WriteFile(file, []byte("keep me"), 0o644)
	err = Execute(context.Background(), &cli.Context{Stdout: io.Discard, Stderr: io.Discard, Args: []string{"-config", cfgPath, "-socket", file}})
	if err == nil || !strings.Contains(err.Error(), "not a socket") || !strings.Contains(err.Error(), file) {
		t.Fatalf("-socket at a regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Errorf("the file is now %q", b)
	}
}
