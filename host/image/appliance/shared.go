package appliance

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
)

// One text store, many appliances (BootOptions.SharedText): every guest of
// an image maps the image's pmem-text.img as a read-only NVDIMM
// (vm.NVDIMM.ReadOnly), so the texts are in the host's memory once,
// however many guests run them, and no guest can change what the others
// run. Each guest has its own state and kernel region (CopyGuestPmem) and
// reads the image's disk read-only (QEMU locks a disk a guest may write
// against a second QEMU; the appliance writes its disk only in an A/B
// update, which a UEFI board does, refused here). nvinit finds the store
// read-only and never writes it: no provisioning, no repair, no deploy.
//
// Such a guest is one of many on its host, so it costs the host what it
// uses: free page reporting (vm.Config.FreePageReporting) gives back what
// its kernel frees, its RAM is in 4 KiB pages (vm.Config.SmallPageRAM),
// and under TCG the translation cache is capped at
// SharedTCGCacheMiB (QEMU's default grew to 94 MiB in the big appliance's
// boot, more than its guest's RAM; a smaller cap flushes a full cache more
// often, and each flush is translated again, which slows the wall-clock
// boot, never the device clock's).

// SharedTCGCacheMiB is a shared-text guest's TCG translation cache when
// BootOptions.TCGCacheMiB leaves it unset.
const SharedTCGCacheMiB = 16

// sharedTextBoard makes c the board of a guest sharing the image's text
// store: its pmem as NVDIMMs (the one transport that tells the guest a
// region is read-only), its disk read-only.
func sharedTextBoard(dir string, im *Image, c *vm.Config, o BootOptions) error {
	own, err := samePath(o.PmemDir, dir)
	if err != nil {
		return fmt.Errorf("image %s: %w", dir, err)
	}
	switch {
	case o.PmemDir == "" || own:
		return fmt.Errorf("image %s: a shared text store needs a pmem directory of the guest's own for its state and kernel region (the image's own would be every guest's)", dir)
	case o.BootDisk:
		return fmt.Errorf("image %s: a shared text store with the disk booted by UEFI firmware: an A/B update writes the disk every guest reads", dir)
	case im.TargetOrDefault() == config.TargetVirt:
		return fmt.Errorf("image %s: a shared text store on the arm64 board: its device-tree pmem regions cannot be read-only (only the pc board's NVDIMMs can)", dir)
	}
	switch o.PmemAs {
	case "", vm.PmemNVDIMM:
	default:
		return fmt.Errorf("image %s: a shared text store as %s pmem: it is an NVDIMM, whose NFIT tells the guest it is read-only (an e820 region cannot say so; use pmem as %s)", dir, o.PmemAs, vm.PmemNVDIMM)
	}
	c.Disks[0].ReadOnly = true
	c.FreePageReporting, c.SmallPageRAM = true, true
	c.TCGCacheMiB = cmp.Or(o.TCGCacheMiB, SharedTCGCacheMiB)
	return nil
}

// samePath says whether a and b name the same directory.
func samePath(a, b string) (bool, error) {
	if a == "" {
		return false, nil
	}
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}

// CopyGuestPmem copies into dst (sparse) the pmem images a guest of a
// shared text store has its own of: every one but the text store. src is
// the image's directory or a directory holding the pmem a first boot left.
func CopyGuestPmem(src string, im *Image, dst string) error {
	for _, p := range im.Pmem {
		if p == outdir.TextPmemFile {
			continue
		}
		if err := copySparseFile(filepath.Join(dst, p), filepath.Join(src, p)); err != nil {
			return fmt.Errorf("copying %s: %w", p, err)
		}
	}
	return nil
}
