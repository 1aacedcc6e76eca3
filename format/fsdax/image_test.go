package fsdax

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/vm"
)

func mkfs(t *testing.T, dir string, files map[string]string, size string) string {
	t.Helper()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	for n, c := range files {
		os.WriteFile(filepath.Join(src, n), []byte(c), 0o644)
	}
	img := filepath.Join(dir, "fs.ext4")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", "-O", "bigalloc", "-C", "2097152",
		"-E", "hash_seed=6e7662f0-0d2c-4b0a-9a1f-70666e646178", "-U", "6e7662f0-0d2c-4b0a-9a1f-70666e646179",
		"-d", src, img, size).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	return img
}

func TestWriteImage(t *testing.T) {
	dir := t.TempDir()
	fs := mkfs(t, dir, map[string]string{"hello": "hi\n"}, "32M")
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	for _, p := range []string{a, b} {
		if err := WriteImage(p, 128<<20, fs); err != nil {
			t.Fatal(err)
		}
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Error("two images of the same filesystem differ")
	}
	in, err := ReadInfo(a)
	if err != nil {
		t.Fatal(err)
	}
	fsb, _ := os.ReadFile(fs)
	if !bytes.Equal(ab[in.DataOff:in.DataOff+uint64(len(fsb))], fsb) {
		t.Error("the filesystem is not at the data offset")
	}
	// e2fsck agrees the filesystem at the data offset is intact.
	if out, err := exec.Command("e2fsck", "-fn", a+"?offset="+strconv.FormatUint(in.DataOff, 10)).CombinedOutput(); err != nil {
		// Older e2fsprogs lack ?offset=: check the extracted copy instead.
		ext := filepath.Join(dir, "x.ext4")
		os.WriteFile(ext, ab[in.DataOff:], 0o644)
		if out2, err2 := exec.Command("e2fsck", "-fn", ext).CombinedOutput(); err2 != nil {
			t.Errorf("e2fsck: %v\n%s\n%s", err2, out, out2)
		}
	}
}

// Bad input names itself and leaves nothing behind: no image, no temp file.
func TestWriteImageRejects(t *testing.T) {
	dir := t.TempDir()
	fs := mkfs(t, dir, nil, "64M")
	out := filepath.Join(dir, "out")
	os.MkdirAll(out, 0o755)
	for name, c := range map[string]struct {
		size int64
		fs   string
		want string
	}{
		"too small":  {64 << 20, fs, "make the image larger"},
		"odd size":   {100<<20 + 1, fs, "multiple of 2 MiB"},
		"missing fs": {128 << 20, filepath.Join(dir, "nope"), "nope"},
	} {
		err := WriteImage(filepath.Join(out, "pmem.img"), c.size, c.fs)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "pmem.img") {
			t.Errorf("%s: error %v, want one naming pmem.img and %q", name, err, c.want)
		}
	}
	if left, _ := os.ReadDir(out); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestKernelSeesFsdax boots the appliance kernel with an image written here:
// /dev/pmem0 is an fsdax device from the first boot, with no setup in the
// guest, and the filesystem mounts with dax=always.
func TestKernelSeesFsdax(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	k := os.Getenv("NVBOOT_KERNEL")
	if k == "" {
		t.Skip("NVBOOT_KERNEL unset (make test sets it)")
	}
	dir := t.TempDir()
	fs := mkfs(t, dir, map[string]string{"hello": "from the host-built pmem image\n"}, "32M")
	img := filepath.Join(dir, "pmem.img")
	if err := WriteImage(img, 128<<20, fs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := vm.RunScript(ctx, vm.Config{Kernel: k, NVDIMMs: []vm.NVDIMM{{Path: img}}}, vm.Script{Script: `
ls /sys/bus/nd/devices/
mkdir -p /mnt && mount -t ext4 -o ro,dax=always /dev/pmem0 /mnt
grep ' /mnt ' /proc/mounts
cat /mnt/hello
`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 0 || !strings.Contains(res.Console, "from the host-built pmem image") ||
		!strings.Contains(res.Console, "dax=always") || !strings.Contains(res.Console, "pfn0.") {
		t.Fatalf("status %d: the kernel did not take the image as fsdax:\n%s", res.Status, res.Console)
	}
}
