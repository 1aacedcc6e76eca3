package appliance

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/derive"
	"github.com/nvboot/nvboot/host/kernel"
)

// staging holds the trees the filesystems are made from.
type staging struct {
	root  string // the root filesystem
	store string // the text store (its filesystem's root)
	esp   string // the EFI system partition
}

// prepare is the first phase: the staging trees, and the configs nvinit
// and poold will read, derived and checked before anything is compiled.
func (b *builder) prepare() (staging, *derive.Configs, error) {
	st := staging{root: filepath.Join(b.work, "root"), store: filepath.Join(b.work, "store"), esp: filepath.Join(b.work, "esp")}
	do := derive.Options{BinDir: b.binDir(), TextStore: b.useStore()}
	if b.Board == BoardRPi {
		do.StateDevice, do.SlotFirmware = contract.RPiDevice(b.Config.Slots, contract.PartData), contract.FirmwareTryboot
		do.NoRTC = true
	}
	dev, err := derive.FromImage(b.Config, do)
	if err != nil {
		return st, nil, err
	}
	for _, d := range []string{st.root, st.store, st.esp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return st, nil, err
		}
	}
	if err := installSkeleton(b.ModuleRoot, st.root); err != nil {
		return st, nil, err
	}
	// An image with A/B slots boots through UEFI, whose firmware runs the
	// slot's UKI and never reads a kernel region: it gets none, and its
	// roots, which every update sends whole, no second kernel. The region
	// holds x86's PVH vmlinux, or the arm64 Image, already uncompressed; a
	// Pi has no pmem to hold it.
	kimage := contract.KernelImage
	if b.Config.Slots < 2 {
		switch b.Target {
		case config.TargetPC:
			if b.uncompressed, err = kernel.Uncompressed(b.Kernel); err != nil {
				return st, nil, fmt.Errorf("kernel: %w", err)
			}
		case config.TargetVirt:
			b.uncompressed, kimage = b.Kernel, contract.KernelImageArm64
		}
	}
	if b.uncompressed != "" {
		// The root keeps a copy for nvinit to write into the region after
		// a boot from the card (a flashed device's first, or one whose
		// region was damaged): the card is the region's source, as the
		// store image is the text store's.
		dst := filepath.Join(st.root, kimage[1:])
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return st, nil, err
		}
		if err := copyFile(dst, b.uncompressed, 0o444); err != nil {
			return st, nil, err
		}
		sum, err := sha256File(dst)
		if err != nil {
			return st, nil, err
		}
		dev.Init.KernelRegion = &contract.KernelRegion{Device: contract.KernelRegionDevice, Image: kimage, SHA256: sum}
	}
	return st, dev, nil
}

// useStore says whether the layout puts programs in the text store (off2f:
// their text; dax-elf: whole executables), which nvinit then keeps current.
func (b *builder) useStore() bool { return b.Layout == OFF2F || b.Layout == DAXELF }

// binDir is where the services' executables are in the contract.
func (b *builder) binDir() string {
	if b.Layout == DAXELF {
		return contract.DAXBinDir
	}
	return contract.BinDir
}

// servicePath is where a service's executable is in the contract.
func (b *builder) servicePath(name string) string { return b.binDir() + "/" + name }
