package nvinit

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

// TestStateSetupLoop provisions a real gzip-compressed ext4 template onto a
// blank loop device, mounts it read-write, keeps what was written there on
// the next run, and leaves a damaged one byte for byte as it is: root only,
// skipped where mke2fs or loop devices are missing.
func TestStateSetupLoop(t *testing.T) {
	needLoopRoot(t, "mke2fs")
	dir := t.TempDir()
	raw := filepath.Join(dir, "state.ext4")
	if out, err := exec.Command("mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", raw, "12M").CombinedOutput(); err != nil {
		t.Fatalf("mke2fs: %v\n%s", err, out)
	}
	image := filepath.Join(dir, "state.ext4.gz")
	if err := os.WriteFile(image, gzipped(t, mustRead(t, raw)), 0o444); err != nil {
		t.Fatal(err)
	}
	backing := filepath.Join(dir, "pmem1.img")
	loop := blankLoop(t, backing, 16<<20)

	cfg := contract.State{Device: loop, Options: "dax=never", Dir: filepath.Join(dir, "nv/state"), Image: image}
	s := &stateSetup{Config: cfg, Mounter: sysMounter{}, Logf: t.Logf}
	for i, want := range []bool{true, false} {
		provisioned, err := s.Run()
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if provisioned != want {
			t.Errorf("run %d: provisioned = %v, want %v", i, provisioned, want)
		}
		kept := filepath.Join(cfg.Dir, "kept")
		if i == 0 {
			if err := os.WriteFile(kept, []byte("state"), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if b, err := os.ReadFile(kept); err != nil || string(b) != "state" {
			t.Errorf("run %d: the state written in run 0: %q, %v", i, b, err)
		}
		if err := syscall.Unmount(cfg.Dir, 0); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("e2fsck", "-fn", loop).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -fn %s: %v\n%s", loop, err, out)
	}

	// A damaged superblock: not blank, not a byte changed.
	f, err := os.OpenFile(loop, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(bytes.Repeat([]byte{0xa5}, 1024), 1024)
	f.Sync()
	f.Close()
	before := mustRead(t, loop)
	if _, err := s.Run(); err == nil || !strings.Contains(err.Error(), "is not blank; left as it is") {
		syscall.Unmount(cfg.Dir, 0)
		t.Fatalf("damaged: %v, want it left as it is", err)
	}
	if !bytes.Equal(mustRead(t, loop), before) {
		t.Error("the damaged state device was written")
	}
}
