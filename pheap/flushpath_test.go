package pheap

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/pmem"
)

// TestCPUFlushPath runs the crash workload on a heap in mode "dax" over a
// shared mapping of a file on an ordinary filesystem: every Flush is a
// pmem.Flush and every Fence a pmem.Fence, so this CPU's flush
// instructions (CLWB or its fallbacks; DC CVAP or DC CVAC) run on every
// commit path. The heap opened again from the file must hold the last
// state. On a page-cache mapping the flushes make nothing more durable:
// this holds that the flush path runs and never changes the data, on
// every machine its tests run on (arm64 under qemu-user: see
// TestArm64UnderQemuUser); durability is the crash simulator's part
// (TestCrashStates) and TestDAXHeapSurvivesPowerCut's.
func TestCPUFlushPath(t *testing.T) {
	if !pmem.Available() {
		t.Skip("no user-space cache flush on this machine")
	}
	path := filepath.Join(t.TempDir(), "heap")
	const size = 1 << 20
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	h, err := CreateMemory(&mapping{b: b, dax: true})
	if err != nil {
		t.Fatal(err)
	}
	if h.Mode() != "dax" {
		t.Fatalf("mode %q, want dax", h.Mode())
	}
	models := workload(t, h, 200, 7, func(string) {})
	want := models[len(models)-1].digest()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Munmap(b); err != nil {
		t.Fatal(err)
	}
	h2, err := Open(path)
	if err != nil {
		t.Fatalf("open after %d transactions on the %s flush path: %v", len(models)-1, pmem.Method(), err)
	}
	defer h2.Close()
	got, err := readModel(h2)
	if err != nil || got.digest() != want {
		t.Fatalf("heap after the %s flush path: %v\n got %s\nwant %s", pmem.Method(), err, got.digest(), want)
	}
	t.Logf("%d transactions flushed with %s", len(models)-1, pmem.Method())
}
