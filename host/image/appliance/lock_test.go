package appliance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
)

// holdLock runs flock(1) on dir in another process, which holds dir's lock
// until the test ends, and returns that process's id once it holds it.
func holdLock(t *testing.T, dir string) int {
	t.Helper()
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1)")
	}
	cmd := exec.Command("flock", "-x", dir, "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Until flock has taken it: a busy error that names no process is
	// flock not there yet, or the lock not found in /proc/locks.
	for i := 0; i < 1000; i++ {
		unlock, err := LockImage(dir)
		if err == nil {
			unlock()
		} else if strings.Contains(err.Error(), fmt.Sprintf("process %d", cmd.Process.Pid)) {
			return cmd.Process.Pid
		}
		if cmd.ProcessState != nil {
			t.Fatal("flock ended")
		}
		sleepBriefly()
	}
	t.Fatalf("flock %s never showed as holding it", dir)
	return 0
}

// An image directory is locked by one user at a time (a running VM, a
// build); the second is refused with an error naming the directory and the
// process that holds it. The lock leaves no file behind.
func TestLockImage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "img")
	writeTree(t, dir, map[string]string{outdir.StampFile: stampText})
	unlock, err := LockImage(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockImage(dir)
	if !errors.Is(err, ErrImageBusy) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) {
		t.Errorf("second lock: %v, want ErrImageBusy naming %s and this process", err, dir)
	}
	unlock()
	unlock, err = LockImage(dir)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlock()

	pid := holdLock(t, dir)
	_, err = LockImage(dir)
	if !errors.Is(err, ErrImageBusy) || !strings.Contains(err.Error(), fmt.Sprintf("process %d (flock -x %s sleep 600)", pid, dir)) {
		t.Errorf("held by flock: %v, want the holder named with its command line", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the lock left files: %v", ents)
	}
	if _, err := LockImage(filepath.Join(dir, "nothing")); err == nil || !strings.Contains(err.Error(), "nothing") {
		t.Errorf("missing directory: %v", err)
	}
}

// A build into an image directory in use (a VM running on its pmem images)
// is refused before anything is built, naming the directory and the holder,
// and leaves the directory as it is.
func TestBuildRefusesLockedImage(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	writeTree(t, out, map[string]string{outdir.StampFile: stampText, outdir.ManifestFile: manifestJSON(t, OFF2F), outdir.StatePmemFile: "state"})
	pid := holdLock(t, out)
	before := snapshot(t, parent)
	_, err := Build(context.Background(), Options{Config: config.Demo(), Layout: OFF2F, Out: out, Kernel: "/nonexistent", ModuleRoot: moduleRoot(t)})
	if !errors.Is(err, ErrImageBusy) || !strings.Contains(err.Error(), out) || !strings.Contains(err.Error(), fmt.Sprintf("process %d", pid)) {
		t.Fatalf("err %v, want ErrImageBusy naming %s and process %d", err, out, pid)
	}
	if err := CheckOut(out); !errors.Is(err, ErrImageBusy) {
		t.Errorf("CheckOut: %v, want ErrImageBusy", err)
	}
	after := snapshot(t, parent)
	if len(after) != len(before) {
		t.Errorf("files changed: before %v, after %v", before, after)
	}
}

func sleepBriefly() { time.Sleep(10 * time.Millisecond) }
