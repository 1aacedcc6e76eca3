package vm

import (
	"bytes"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/vm/vmtest"
)

// A read-only region is an unarmed NVDIMM over a read-only backend, and
// neither option appears on a writable one; every other transport refuses
// it.
func TestArgsReadOnlyPmem(t *testing.T) {
	a, err := Config{Kernel: "bz", NVDIMMs: []NVDIMM{{Path: "t", Size: 128 << 20, ReadOnly: true}, {Path: "s", Size: 128 << 20}}}.args("tcg")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Join(a, " ")
	for _, want := range []string{"id=pm0,share=on,mem-path=t,size=134217728,readonly=on ", "nvdimm,id=nv0,memdev=pm0,unarmed=on ",
		"id=pm1,share=on,mem-path=s,size=134217728 ", "nvdimm,id=nv1,memdev=pm1 "} {
		if !strings.Contains(s+" ", want) {
			t.Errorf("args lack %q:\n%s", want, s)
		}
	}
	ro := []NVDIMM{{Path: "t", Size: 128 << 20, ReadOnly: true}}
	for name, c := range map[string]Config{
		"e820":  {Kernel: "bz", NVDIMMs: ro, PmemAs: PmemE820},
		"arm64": {Arch: ArchArm64, Kernel: "Image", NVDIMMs: ro},
	} {
		_, err := c.args("tcg")
		if err == nil || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), "t)") {
			t.Errorf("%s: read-only pmem: %v, want a refusal naming the region", name, err)
		}
	}
}

// TestReadOnlyPmem: two guests map one file as a read-only NVDIMM at once.
// In each the kernel says the device is read-only and refuses a write and a
// read-write mount, while a read-only mount reads the file; a root that
// sets the region read-write again writes into QEMU's ROM, and the host's
// file keeps every byte.
func TestReadOnlyPmem(t *testing.T) {
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "hello"), []byte("from the host\n"), 0o644)
	pmem := filepath.Join(dir, "pmem.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", "-d", src, pmem, "128M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	// As a guest's shared text store is: nobody may write it.
	if err := os.Chmod(pmem, 0o444); err != nil {
		t.Fatal(err)
	}
	before := fileHash(t, pmem)
	cfg := Config{Kernel: k, PmemAs: PmemNVDIMM, NVDIMMs: []NVDIMM{{Path: pmem, ReadOnly: true}}}
	script := Script{Script: `
echo "ro=$(cat /sys/block/pmem0/ro) region=$(cat /sys/bus/nd/devices/region0/read_only)"
if dd if=/dev/zero of=/dev/pmem0 bs=4096 count=1 conv=fsync 2>/tmp/dd; then echo WRITE-TOOK; else echo "write refused: $(cat /tmp/dd)"; fi
mkdir -p /mnt
if mount -t ext4 -o rw,errors=remount-ro /dev/pmem0 /mnt 2>/tmp/mount && grep -q ' /mnt ext4 rw' /proc/mounts; then echo RW-MOUNT-TOOK; else echo "rw mount refused"; fi
umount /mnt 2>/dev/null || true
mount -t ext4 -o ro /dev/pmem0 /mnt
echo "read: $(cat /mnt/hello)"
umount /mnt
echo 0 > /sys/bus/nd/devices/region0/read_only
echo "forced: ro=$(cat /sys/block/pmem0/ro)"
dd if=/dev/zero of=/dev/pmem0 bs=4096 count=256 conv=fsync 2>/dev/null
echo forced write done
`}
	ctx := ctxFor(t, 4*time.Minute)
	var wg sync.WaitGroup
	res := make([]*ScriptResult, 2)
	errs := make([]error, 2)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = RunScript(ctx, cfg, script)
		}()
	}
	wg.Wait()
	for i, r := range res {
		if errs[i] != nil {
			t.Fatalf("guest %d: %v", i, errs[i])
		}
		con := r.Console
		for _, want := range []string{"ro=1 region=1", "write refused: ", "Operation not permitted", "rw mount refused", "read: from the host", "forced: ro=0", "forced write done"} {
			if !strings.Contains(con, want) {
				t.Errorf("guest %d: console lacks %q:\n%s", i, want, con)
			}
		}
		if r.Status != 0 || strings.Contains(con, "TOOK") {
			t.Errorf("guest %d (status %d) wrote the read-only device:\n%s", i, r.Status, con)
		}
	}
	if after := fileHash(t, pmem); !bytes.Equal(before, after) {
		t.Errorf("the read-only region's file changed: %x, was %x", after, before)
	}
}

func fileHash(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return h[:]
}
