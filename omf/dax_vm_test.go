package omf_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/guestrun"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
)

// TestDAXWindows runs omf where it is meant to run: ext4 mounted
// dax=always on an fsdax pmem namespace of the appliance kernel in QEMU.
// Boot 1 writes a file, reads it through omf in mode "dax", stores through
// a writable window (MAP_SYNC) with SyncBlock after each store (pmem's
// flushes), and then the power is cut with nothing closed or fsync'ed.
// Boot 2 reads the stores back, holds Open's DAX answer (statx) to the
// kernel's acceptance of MAP_SYNC, reads windows between Unmaps, and a
// window read after the file is
// truncated under it returns ErrTruncated, not SIGBUS. (QEMU writes guest
// stores to the NVDIMM's file at once, so the cut loses no cache line: this
// holds the DAX mapping path, not the flush ordering.)
//
// On virtio-pmem (the board without ACPI the appliance runs with -pmem
// virtio) the same, except that the device is asynchronous: the kernel
// refuses MAP_SYNC, and the writable File is in mode dax-msync from Open
// on, SyncBlock an msync.
func TestDAXWindows(t *testing.T) {
	kernel := vmtest.Kernel(t, "qemu-system-x86_64", "mkfs.ext4")
	bin := vmtest.StaticProgram(t, "./testdata/daxomf")
	for _, tc := range []struct{ pmem, mode string }{{vm.PmemNVDIMM, "dax"}, {vm.PmemVirtio, "dax-msync"}} {
		t.Run(tc.pmem, func(t *testing.T) { daxWindows(t, kernel, bin, tc.pmem, tc.mode) })
	}
}

func daxWindows(t *testing.T, kernel, bin, pmemAs, mode string) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	img, err := guestrun.FsdaxImage(ctx, dir, 256<<20)
	if err != nil {
		t.Fatal(err)
	}
	cfg := vm.Config{Kernel: kernel, NVDIMMs: []vm.NVDIMM{{Path: img}}, PmemAs: pmemAs, NoACPI: pmemAs == vm.PmemVirtio}
	files := map[string]string{"bin/daxomf": bin}
	mount := "mkdir -p /mnt && mount -t ext4 -o dax=always /dev/pmem0 /mnt && grep ' /mnt ' /proc/mounts\n"

	initrd := filepath.Join(dir, "initrd")
	if err := (vm.Script{Files: files, Script: mount + "/bin/daxomf write /mnt/f\n"}).BuildInitramfs(initrd); err != nil {
		t.Fatal(err)
	}
	c1 := cfg
	c1.Initrd, c1.Cmdline = initrd, "quiet"
	m, err := vm.Start(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = m.Expect(ctx, 0, func(s string) bool {
		return strings.Contains(s, "DAXOMF synced") || strings.Contains(s, "DAXOMF error") || strings.Contains(s, "NVBOOT-SCRIPT-EXIT")
	})
	m.Kill() // the power cut
	con := m.Console()
	if err != nil || !strings.Contains(con, "DAXOMF synced") {
		t.Fatalf("boot 1: %v\n%s", err, con)
	}
	if !strings.Contains(con, "dax=always") || !strings.Contains(con, "DAXOMF mode "+mode+"\n") {
		t.Fatalf("boot 1 did not run omf on DAX in mode %s:\n%s", mode, con)
	}

	res, err := vm.RunScript(ctx, cfg, vm.Script{Files: files, Script: mount + "/bin/daxomf verify /mnt/f\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot 2:\n%s", vm.LastLines(res.Console, 6))
	if res.Status != 0 || !strings.Contains(res.Console, "DAXOMF verified") || !strings.Contains(res.Console, "DAXOMF mode "+mode+"\n") {
		t.Fatalf("boot 2 (status %d):\n%s", res.Status, res.Console)
	}
}
