package appliance

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/kernelpmem"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/atomicfile"
)

// kernelRegionSize is the kernel region's size: twice the uncompressed
// kernel (about 16 MiB), in the 2 MiB subsections the kernel adds pmem in;
// every page of it costs a struct page at boot (see pmemSize).
const kernelRegionSize = 32 << 20

// kernelRegion puts the uncompressed kernel in the image: the vmlinux
// itself (what the boot entry names, by hash; an arm64 image's Image is
// already there, as its kernel) and the kernel region holding it, pmem2,
// written as nvinit would write it on the device.
func (b *builder) kernelRegion(im *Image) error {
	if b.uncompressed == "" {
		return nil
	}
	k, err := os.ReadFile(b.uncompressed)
	if err != nil {
		return err
	}
	name := outdir.UncompressedFileOf(b.Target.GOARCH())
	if name != im.Kernel {
		if err := atomicfile.WriteFile(filepath.Join(b.dir, name), k, 0o644); err != nil {
			return err
		}
	}
	f, err := atomicfile.Create(filepath.Join(b.dir, outdir.KernelPmemFile))
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := f.Truncate(kernelRegionSize); err != nil {
		return err
	}
	if err := kernelpmem.Write(f, kernelRegionSize, k); err != nil {
		return err
	}
	if err := f.Commit(0o600); err != nil {
		return err
	}
	h := kernelpmem.For(k)
	im.Uncompressed, im.UncompressedSHA256 = name, fmt.Sprintf("%x", h.Sum)
	im.Pmem = append(im.Pmem, outdir.KernelPmemFile)
	b.logf("kernel region: the %d MiB uncompressed kernel on pmem2", len(k)>>20)
	return nil
}

// PmemReadBPS is the rate at which the firmware copies the kernel out of
// the kernel region: 1 GiB/s, a byte-at-a-time copy on the 1-GIPS core
// the device clock models (under -icount a REP MOVSB counts one
// instruction a byte). Memory-mapped persistent memory reads several GB/s
// (Optane DC PMM about 6.6 GB/s a DIMM; battery-backed DRAM more), so it
// overstates the copy, never understates it.
const PmemReadBPS = 1 << 30

// BootKernel is what the image's firmware boots (see "Kernel on pmem" in
// the package documentation).
type BootKernel struct {
	Path string // the kernel QEMU loads: the vmlinux or the bzImage
	// From is contract.KernelFromPmem or contract.KernelFromCard; "" for an
	// image without a kernel region (nvinit is told nothing).
	From string
	// Why is the reason a region was not booted ("" when it was).
	Why string
	// LoadBytes are what the firmware reads or copies before the kernel
	// runs: the vmlinux's loaded segments from pmem, or the bzImage (and
	// initramfs) from the card.
	LoadBytes int64
}

// Describe says in a line which kernel the firmware boots and why.
func (k BootKernel) Describe() string {
	switch k.From {
	case contract.KernelFromPmem:
		return fmt.Sprintf("firmware: the kernel from the kernel region on pmem (%s, %.1f MiB copied)", filepath.Base(k.Path), float64(k.LoadBytes)/(1<<20))
	case contract.KernelFromCard:
		return fmt.Sprintf("firmware: the card's kernel (%s): %s; nvinit writes the region once the services are ready", filepath.Base(k.Path), k.Why)
	}
	return fmt.Sprintf("firmware: the card's kernel (%s)", filepath.Base(k.Path))
}

// ChooseKernel does what the image's firmware does at power-on: boot the
// kernel region's kernel when its header is valid, its bytes hash to what
// the header says and that hash is the one the image names (a region
// from an older image, or damaged, is not booted); otherwise the card's
// bzImage. pmemDir holds the pmem images ("": dir's own).
func ChooseKernel(dir string, im *Image, pmemDir string) (BootKernel, error) {
	card := BootKernel{Path: filepath.Join(dir, im.Kernel)}
	if im.Uncompressed == "" {
		return card, nil
	}
	card.From = contract.KernelFromCard
	if pmemDir == "" {
		pmemDir = dir
	}
	region := filepath.Join(pmemDir, outdir.KernelPmemFile)
	h, err := kernelpmem.CheckFile(region)
	switch {
	case err != nil:
		card.Why = err.Error()
		return card, nil
	case fmt.Sprintf("%x", h.Sum) != im.UncompressedSHA256:
		card.Why = "the kernel region holds another kernel than this image's"
		return card, nil
	}
	path := filepath.Join(dir, im.Uncompressed)
	if sum, err := sha256File(path); err != nil {
		return BootKernel{}, fmt.Errorf("image %s: %w", dir, err)
	} else if sum != im.UncompressedSHA256 {
		return BootKernel{}, fmt.Errorf("image %s: %s does not hash to what %s says (%s): rebuild the image", dir, im.Uncompressed, outdir.ManifestFile, im.UncompressedSHA256)
	}
	n, err := loadedBytes(path, im.TargetOrDefault())
	if err != nil {
		return BootKernel{}, fmt.Errorf("image %s: %w", dir, err)
	}
	return BootKernel{Path: path, From: contract.KernelFromPmem, LoadBytes: n}, nil
}

// regionBoard says whether im's board boots from the kernel region: the
// direct boot of an x86 board (pc or microvm) with its pmem as e820
// regions or virtio-pmem devices, or of the virt board (its regions the
// device tree's), whose firmware the VM runner plays. UEFI firmware (BootDisk) boots the card's UKI, and with emulated
// NVDIMMs the region would be a third ACPI NVDIMM whose namespace order
// nvinit cannot rely on; both boot without it.
func regionBoard(im *Image, o BootOptions) bool {
	pmem := o.pmemAs()
	switch im.TargetOrDefault() {
	case config.TargetPC:
		return !o.BootDisk && (pmem == vm.PmemE820 || pmem == vm.PmemVirtio)
	case config.TargetVirt:
		return !o.BootDisk && (pmem == vm.PmemE820 || pmem == vm.PmemDeviceTree)
	}
	return false
}

// BootKernelOf is ChooseKernel on a board that boots from the region,
// the card's kernel (and no nvboot.kernel) on any other.
func BootKernelOf(dir string, im *Image, o BootOptions) (BootKernel, error) {
	if !regionBoard(im, o) {
		return BootKernel{Path: filepath.Join(dir, im.Kernel)}, nil
	}
	return ChooseKernel(dir, im, o.PmemDir)
}

// loadedBytes are the bytes the firmware puts in memory for the kernel at
// path. An arm64 Image is copied whole and entered at its first byte; the
// kernel clears its own .bss (head.S, __primary_switched), in instructions
// the device clock counts. An ELF (x86's PVH vmlinux): each allocated
// section, copied or (.bss) cleared, as U-Boot's bootelf loads an ELF by
// default, by its section headers. Over the loaded segments, because the
// kernel's first segment carries the padding between its text and its
// read-only data (both aligned to 2 MiB), which the kernel frees without
// reading it: the appliance kernel's 10.8 MiB of sections against 12.8 of
// segments, 2.0 ms less on the device clock (nvboot measure). A file
// without section headers counts its loaded segments.
func loadedBytes(path string, t config.Target) (int64, error) {
	if t.GOARCH() == "arm64" {
		st, err := os.Stat(path)
		if err != nil {
			return 0, err
		}
		return st.Size(), nil
	}
	f, err := elf.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 {
			n += int64(s.Size) // copied, or zeroed for SHT_NOBITS
		}
	}
	if n > 0 {
		return n, nil
	}
	// No section headers: the loaded segments, padding and all.
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			n += int64(p.Memsz)
		}
	}
	return n, nil
}
