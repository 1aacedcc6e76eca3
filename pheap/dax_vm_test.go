package pheap_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
)

// TestDAXHeapSurvivesPowerCut runs pheap where it is meant to run: on an
// ext4 filesystem mounted with dax=always on an fsdax pmem namespace of
// the appliance kernel in QEMU. Boot 1 creates a heap there, which must
// map it with MAP_SYNC (Mode "dax": CPU cache flushes, no msync), and
// commits transactions until the power is cut (SIGKILL of QEMU) in the
// middle of them. The script never syncs the filesystem: the heap file,
// its size and the blocks first written through the mapping survive only
// through Create's fsyncs and MAP_SYNC (a DAX mapping with neither loses
// the file here). Boot 2 opens the heap, again
// in mode "dax": it must check clean (Check, and every object reachable)
// and hold every transaction whose commit boot 1 reported on the console.
//
// QEMU writes guest stores straight to the NVDIMM's backing file, so the
// cut loses no cache line: the ordering of flushes and fences is the crash
// simulator's part (crash_test.go); this test covers the DAX mapping, the
// filesystem and recovery after a real cut.
//
// On virtio-pmem (the board without ACPI the appliance runs with -pmem
// virtio) the device is asynchronous: the kernel refuses MAP_SYNC, the
// heap is in mode "msync" in both boots, and every durability point is an
// msync that the device turns into a flush request, which QEMU answers
// after an fsync of the backing file. QEMU's own trace of those fsyncs
// (virtio_pmem_flush_done) counts at least one for every transaction boot
// 1 reported committed: the heap never claimed a commit the host had not
// made durable.
func TestDAXHeapSurvivesPowerCut(t *testing.T) {
	kernel := vmtest.Kernel(t, "qemu-system-x86_64", "mkfs.ext4")
	bin := vmtest.StaticProgram(t, "./testdata/daxheap")
	for _, tc := range []struct{ pmem, mode string }{{vm.PmemNVDIMM, "dax"}, {vm.PmemVirtio, "msync"}} {
		t.Run(tc.pmem, func(t *testing.T) { daxHeapSurvivesPowerCut(t, kernel, bin, tc.pmem, tc.mode) })
	}
}

// flushDone is QEMU's trace line for a virtio-pmem flush request answered
// after a successful fsync of the backing file.
const flushDone = "virtio_pmem_flush_done fsync return=0"

func daxHeapSurvivesPowerCut(t *testing.T, kernel, bin, pmemAs, wantMode string) {
	dir := t.TempDir()
	pmem := filepath.Join(dir, "pmem.img")
	if err := os.WriteFile(pmem, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(pmem, 256<<20); err != nil {
		t.Fatal(err)
	}
	fsimg := filepath.Join(dir, "fs.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", fsimg, "64M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	cfg := vm.Config{Kernel: kernel, NVDIMMs: []vm.NVDIMM{{Path: pmem}}, Disks: []vm.Disk{{Path: fsimg, ReadOnly: true}},
		PmemAs: pmemAs, NoACPI: pmemAs == vm.PmemVirtio}
	trace := filepath.Join(dir, "qemu-trace.log")
	files := map[string]string{"bin/daxheap": bin}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// Boot 1: fsdax, the filesystem, the heap; cut after some commits.
	initrd := filepath.Join(dir, "initrd")
	err := vm.Script{Files: files, Script: `
nvboot_fsdax namespace0.0
dd if=/dev/vda of=/dev/pmem0 bs=1M 2>/dev/null
mkdir -p /mnt && mount -t ext4 -o dax=always /dev/pmem0 /mnt
grep ' /mnt ' /proc/mounts
/bin/daxheap run /mnt/state.heap
`}.BuildInitramfs(initrd)
	if err != nil {
		t.Fatal(err)
	}
	c1 := cfg
	c1.Initrd, c1.Cmdline = initrd, "quiet"
	if pmemAs == vm.PmemVirtio {
		c1.Extra = []string{"-trace", "virtio_pmem_flush_done", "-D", trace}
	}
	m, err := vm.Start(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	const cutAfter = 50
	_, _, err = m.Expect(ctx, 0, func(s string) bool { return committed(s) >= cutAfter || strings.Contains(s, "DAXHEAP error") })
	m.Kill() // the power cut, while transactions run
	con := m.Console()
	if err != nil {
		t.Fatalf("boot 1: %v\n%s", err, con)
	}
	if !strings.Contains(con, "dax=always") {
		t.Fatalf("boot 1: /mnt is not mounted with dax=always:\n%s", con)
	}
	if mode := field(con, "DAXHEAP mode "); mode != wantMode {
		t.Fatalf("boot 1: the heap on the DAX mount (%s) is in mode %q, want %s:\n%s", pmemAs, mode, wantMode, con)
	}
	acked := 0
	for _, l := range strings.Split(con, "\n") {
		acked = max(acked, committed(l))
	}
	if acked < cutAfter {
		t.Fatalf("boot 1: %d transactions reported committed, want at least %d:\n%s", acked, cutAfter, con)
	}
	if pmemAs == vm.PmemVirtio {
		b, err := os.ReadFile(trace)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), flushDone); n < acked {
			t.Fatalf("boot 1: %d transactions reported committed, but QEMU answered only %d flush requests after an fsync of the backing file", acked, n)
		} else {
			t.Logf("boot 1: %d flush requests answered after the host's fsync for %d reported commits", n, acked)
		}
	}

	// Boot 2: the heap after the cut.
	res, err := vm.RunScript(ctx, cfg, vm.Script{Files: files, Script: `
mkdir -p /mnt && mount -t ext4 -o dax=always /dev/pmem0 /mnt
/bin/daxheap verify /mnt/state.heap
`})
	if err != nil {
		t.Fatal(err)
	}
	con = res.Console
	if res.Status != 0 || strings.Contains(con, "DAXHEAP error") {
		t.Fatalf("boot 2 (status %d): the heap does not check clean after the cut:\n%s", res.Status, con)
	}
	if mode := field(con, "DAXHEAP mode "); mode != wantMode {
		t.Errorf("boot 2: heap reopened in mode %q, want %s:\n%s", mode, wantMode, con)
	}
	if !strings.Contains(con, "DAXHEAP check ok") {
		t.Errorf("boot 2: no check result:\n%s", con)
	}
	holds, err := strconv.Atoi(field(con, "DAXHEAP holds "))
	if err != nil || holds < acked {
		t.Fatalf("boot 2: the heap holds %d transactions (%v), %d were reported committed before the cut:\n%s", holds, err, acked, con)
	}
	t.Logf("cut after %d reported commits; the heap holds %d, checks clean, mode %s in both boots", acked, holds, wantMode)
}

// committed returns i for a "DAXHEAP committed i" line, else 0.
func committed(line string) int {
	_, rest, ok := strings.Cut(line, "DAXHEAP committed ")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(rest))
	return n
}

// field returns the rest of the first console line holding prefix.
func field(console, prefix string) string {
	for _, l := range strings.Split(console, "\n") {
		if _, rest, ok := strings.Cut(l, prefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}
