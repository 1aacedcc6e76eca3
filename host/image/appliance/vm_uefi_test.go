package appliance

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// TestUEFIBootsTheDisk boots disk.img as a board boots it: UEFI firmware
// (OVMF), no -kernel, the firmware reads the unified kernel image from the
// EFI system partition and its stub hands the kernel the image's command
// line (and, in the initramfs layout, the initramfs). nvinit must run, kv
// must answer through the network, and the guest must power off cleanly.
// Before the UKI the kernel got an empty command line and panicked with no
// root filesystem.
func TestUEFIBootsTheDisk(t *testing.T) {
	buildtest.NeedTools(t)
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	if _, err := os.Stat(vm.OVMF); err != nil {
		t.Skipf("no UEFI firmware for QEMU: %v (Debian package ovmf)", err)
	}
	for _, l := range []Layout{OFF2F, Initramfs} {
		t.Run(string(l), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			im := buildLayout(t, config.Demo(), l, dir, k)
			pm := t.TempDir()
			if err := CopyPmem(dir, im, pm); err != nil {
				t.Fatal(err)
			}
			b := startWith(t, dir, im, BootOptions{PmemDir: pm, Firmware: vm.OVMF, BootDisk: true})
			if !slices.Contains(b.m.Args, vm.OVMF) || slices.Contains(b.m.Args, "-kernel") {
				t.Fatalf("not a firmware boot of the disk: %q", b.m.Args)
			}
			b.expect(t, "NVBOOT-MARK init ")
			b.expect(t, "NVBOOT-MARK service-ready kv ")
			if code, _ := b.do(t, "PUT", "/kv/booted-by", "uefi"); code != http.StatusNoContent {
				t.Fatalf("PUT: %d", code)
			}
			if code, v := b.do(t, "GET", "/kv/booted-by", ""); code != http.StatusOK || v != "uefi" {
				t.Fatalf("GET: %d %q", code, v)
			}
			b.poweroff(t)
		})
	}
}
