package appliance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
)

// A guest of a shared text store maps the image's own pmem-text.img
// read-only and its own state from its pmem directory, as NVDIMMs, its
// disk read-only; what cannot be shared safely is refused by name.
func TestVMConfigSharedText(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "img")
	im := diskImage(t, dir)
	// The kernel region is a board's that boots from e820 pmem: not on
	// the NVDIMM board of a shared store.
	im.Pmem = append(im.Pmem, outdir.KernelPmemFile)
	for _, f := range im.Pmem {
		if err := os.WriteFile(filepath.Join(dir, f), make([]byte, 128<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	guest := t.TempDir()
	if err := CopyGuestPmem(dir, im, guest); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(guest, outdir.KernelPmemFile)); err != nil {
		t.Errorf("CopyGuestPmem did not copy the kernel region: %v", err)
	}
	if _, err := os.Stat(filepath.Join(guest, outdir.TextPmemFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CopyGuestPmem copied the text store: %v", err)
	}
	c, err := VMConfig(dir, im, BootOptions{PmemDir: guest, SharedText: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []vm.NVDIMM{{Path: filepath.Join(dir, outdir.TextPmemFile), ReadOnly: true}, {Path: filepath.Join(guest, outdir.StatePmemFile)}}
	if fmt.Sprint(c.NVDIMMs) != fmt.Sprint(want) || c.PmemAs != vm.PmemNVDIMM || c.NoACPI || !c.Disks[0].ReadOnly {
		t.Errorf("shared text: NVDIMMs %v as %s (NoACPI %v), disk %+v; want %v as NVDIMMs, ACPI on, the disk read-only", c.NVDIMMs, c.PmemAs, c.NoACPI, c.Disks[0], want)
	}
	// One of many: it gives back what it frees, and TCG's cache is capped.
	if !c.FreePageReporting || !c.SmallPageRAM || c.TCGCacheMiB != SharedTCGCacheMiB {
		t.Errorf("shared text: free page reporting %v, 4 KiB pages %v, TCG cache %d MiB; want on, on, %d", c.FreePageReporting, c.SmallPageRAM, c.TCGCacheMiB, SharedTCGCacheMiB)
	}
	if c, err = VMConfig(dir, im, BootOptions{PmemDir: guest, SharedText: true, TCGCacheMiB: 64}); err != nil || c.TCGCacheMiB != 64 {
		t.Errorf("shared text with a TCG cache of 64 MiB: %v, %d", err, c.TCGCacheMiB)
	}
	c, err = VMConfig(dir, im, BootOptions{PmemAs: vm.PmemNVDIMM})
	if err != nil {
		t.Fatal(err)
	}
	if c.NVDIMMs[0].ReadOnly || c.Disks[0].ReadOnly || c.FreePageReporting || c.SmallPageRAM || c.TCGCacheMiB != 0 {
		t.Errorf("without SharedText: %+v", c)
	}
	for name, tc := range map[string]struct {
		o    BootOptions
		want string
	}{
		"no guest dir":     {BootOptions{SharedText: true}, "pmem directory of the guest's own"},
		"the image's own":  {BootOptions{SharedText: true, PmemDir: dir}, "pmem directory of the guest's own"},
		"e820":             {BootOptions{SharedText: true, PmemDir: guest, PmemAs: vm.PmemE820}, "an e820 region cannot say so"},
		"UEFI":             {BootOptions{SharedText: true, PmemDir: guest, BootDisk: true, Firmware: vm.OVMF}, "A/B update"},
		"guest dir absent": {BootOptions{SharedText: true, PmemDir: filepath.Join(guest, "none")}, "none"},
	} {
		if _, err := VMConfig(dir, im, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v, want an error naming the image and %q", name, err, tc.want)
		}
	}
	im.Arch, im.Target, im.Kernel = "arm64", config.TargetVirt, "Image"
	if _, err := VMConfig(dir, im, BootOptions{SharedText: true, PmemDir: guest}); err == nil || !strings.Contains(err.Error(), "arm64") {
		t.Errorf("arm64: %v", err)
	}
}

// Guests of a shared text store share the image's lock; a user that
// writes the image (a build, a guest on its own pmem) is refused while
// one runs, and they are refused while it holds it.
func TestLockImageShared(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "img")
	writeTree(t, dir, map[string]string{outdir.StampFile: stampText})
	a, err := LockImageShared(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LockImageShared(dir)
	if err != nil {
		t.Fatalf("second shared lock: %v", err)
	}
	if _, err := LockImage(dir); !errors.Is(err, ErrImageBusy) || !strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) {
		t.Errorf("exclusive lock beside shared ones: %v, want ErrImageBusy naming this process", err)
	}
	a()
	b()
	unlock, err := LockImage(dir)
	if err != nil {
		t.Fatalf("exclusive lock after the shared ones: %v", err)
	}
	if _, err := LockImageShared(dir); !errors.Is(err, ErrImageBusy) {
		t.Errorf("shared lock beside an exclusive one: %v, want ErrImageBusy", err)
	}
	unlock()
}
