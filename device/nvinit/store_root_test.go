package nvinit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

// TestStoreSetupLoop provisions a real ext4 image onto a loop device and
// mounts it: root only, skipped where mkfs.ext4 or loop devices are missing.
func TestStoreSetupLoop(t *testing.T) {
	needLoopRoot(t, "mkfs.ext4")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "MANIFEST"), []byte(hashA+"\n"), 0o644)
	os.WriteFile(filepath.Join(src, hashA), []byte("text"), 0o444)
	image := filepath.Join(dir, "text.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-d", src, image, "8M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	loop := blankLoop(t, filepath.Join(dir, "pmem.img"), 16<<20)

	cfg := contract.TextStore{Device: loop, Options: "dax=never", Dir: filepath.Join(dir, "nv/text"),
		Image: image, Manifest: filepath.Join(src, "MANIFEST")}
	s := &storeSetup{Config: cfg, Mounter: sysMounter{}, MountInfo: "/proc/self/mountinfo", Logf: t.Logf}
	for i, want := range []bool{true, false} {
		provisioned, err := s.Run()
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if provisioned != want {
			t.Errorf("run %d: provisioned = %v, want %v", i, provisioned, want)
		}
		if b, err := os.ReadFile(filepath.Join(cfg.Dir, hashA)); err != nil || string(b) != "text" {
			t.Errorf("run %d: store file: %q, %v", i, b, err)
		}
		if err := syscall.Unmount(cfg.Dir, 0); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("e2fsck", "-fn", loop).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -fn %s: %v\n%s", loop, err, out)
	}
}

// needLoopRoot skips unless this runs as root with losetup, e2fsck and mkfs.
func needLoopRoot(t *testing.T, mkfs string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (loop device, mount)")
	}
	for _, tool := range []string{mkfs, "losetup", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
}

// blankLoop is a loop device over a new zero file of size bytes at backing,
// detached when the test ends.
func blankLoop(t *testing.T, backing string, size int) string {
	t.Helper()
	if err := os.WriteFile(backing, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", backing).Output()
	if err != nil {
		t.Skipf("losetup: %v", err)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", loop).Run() })
	return loop
}

// TestStoreSetupReadOnlyLoop: a store on a read-only loop device (as a
// shared store's NVDIMM is read-only) that is blank is not provisioned,
// and its bytes stay as they were; the same device read-write is.
func TestStoreSetupReadOnlyLoop(t *testing.T) {
	needLoopRoot(t, "mkfs.ext4")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "MANIFEST"), []byte(hashA+"\n"), 0o644)
	image := filepath.Join(dir, "text.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-d", src, image, "8M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	backing := filepath.Join(dir, "pmem.img")
	blankLoop(t, backing, 16<<20)
	out, err := exec.Command("losetup", "--find", "--show", "--read-only", backing).Output()
	if err != nil {
		t.Skipf("losetup --read-only: %v", err)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", loop).Run() })
	if ro, err := blockReadOnly(loop); err != nil || !ro {
		t.Fatalf("blockReadOnly(%s) = %v, %v; want a read-only device", loop, ro, err)
	}
	cfg := contract.TextStore{Device: loop, Options: "dax=never", Dir: filepath.Join(dir, "nv/text"),
		Image: image, Manifest: filepath.Join(src, "MANIFEST")}
	s := &storeSetup{Config: cfg, Mounter: sysMounter{}, MountInfo: "/proc/self/mountinfo", Logf: t.Logf}
	provisioned, err := s.Run()
	if provisioned || err == nil || !strings.Contains(err.Error(), "read-only") || !s.DeviceReadOnly {
		t.Errorf("Run = %v, %v (read-only %v); want no provisioning and an error saying the device is read-only", provisioned, err, s.DeviceReadOnly)
	}
	if b, _ := os.ReadFile(backing); strings.Trim(string(b), "\x00") != "" {
		t.Error("the read-only device was written")
	}
}
