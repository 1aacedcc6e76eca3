package appliance

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
)

// BootOptions say how to boot a built image in QEMU.
type BootOptions struct {
	Storage  vm.Storage   // speed model of the disk
	Forwards []vm.Forward // host ports to guest ports
	// PmemDir holds the pmem images to attach; "": the image's own (so
	// state persists from run to run). measure boots copies.
	PmemDir string
	MemMiB  int    // default DefaultMemMiB
	Accel   string // "": KVM when it really works, else TCG
	CPURate int64  // the device clock's instructions per second; 0: the wall clock (see vm.Config)
	// PmemAs is how the pmem images reach the guest (vm.PmemE820,
	// vm.PmemNVDIMM or vm.PmemVirtio); "": DefaultPmemAs.
	PmemAs string
	// Board is the x86-64 machine (vm.BoardPC, vm.BoardMicrovm); "": the
	// pc board. An arm64 image boots on QEMU's virt board.
	Board   string
	Console io.Writer
	Stdin   io.Reader
	// ExtraCmdline is appended to the image's kernel command line.
	ExtraCmdline string
	// Firmware is the firmware QEMU runs (vm.Config.Firmware); "": qboot
	// where installed, else SeaBIOS.
	Firmware string
	// BootDisk boots the disk image as a board does: the firmware (UEFI:
	// vm.OVMF) runs the unified kernel image on its EFI system partition,
	// whose command line is the image's; no -kernel, no ExtraCmdline.
	BootDisk bool
	// Disks are attached after the image's disk (/dev/vdb, /dev/vdc...):
	// what a gokrazy config's MountDevices mounts.
	Disks []vm.Disk
	// DiskAsPmem attaches the image's disk as one more pmem device after
	// the pmem images (a copy in PmemDir, padded to the region size), not
	// as a virtio disk: the kernel reads it with its own copies, so under
	// the device clock a read costs guest instructions and the storage
	// model's waits (nvinit's io.max, on the guest's timers), never the
	// host's I/O latency. Needs CPURate and a Storage model; measure sets it.
	DiskAsPmem bool
	// SharedText maps the image's own text store (dir's pmem-text.img)
	// read-only into the guest, so that many guests of one image share
	// that file and the host's page cache of it (shared.go); the other
	// pmem images come from PmemDir, which each guest needs its own of,
	// and the disk is attached read-only.
	SharedText bool
	// TCGCacheMiB caps the guest's TCG translation cache
	// (vm.Config.TCGCacheMiB); 0: QEMU's default, or SharedTCGCacheMiB
	// for a guest of a shared text store.
	TCGCacheMiB int
}

// DefaultPmemAs gives the appliance its pmem as e820 regions: RAM the
// firmware says is persistent, as on a board with persistent RAM. Emulated
// NVDIMMs (vm.PmemNVDIMM) work the same but cost the kernel about 40 ms of
// a 1-GIPS boot in QEMU's ACPI methods (docs/BENCHMARKS.md).
const DefaultPmemAs = vm.PmemE820

// pmemAs is how the pmem images reach the guest: o.PmemAs, else
// DefaultPmemAs, but NVDIMMs for a shared text store (sharedTextBoard).
func (o BootOptions) pmemAs() string {
	if o.SharedText && o.PmemAs == "" {
		return vm.PmemNVDIMM
	}
	return cmp.Or(o.PmemAs, DefaultPmemAs)
}

// DefaultMemMiB is the guest's RAM when BootOptions leave it unset.
const DefaultMemMiB = 256

// VMConfig is the QEMU machine for the image in dir: the kernel booted
// directly with the image's command line (what the unified kernel image on
// the EFI system partition hands over), or with BootDisk the disk booted by
// the firmware; the disk image as vda, pmem0 the text store, pmem1 the
// state, pmem2 the kernel region. The kernel is the one the firmware would
// take (ChooseKernel): the region's when it is valid and this image's,
// else the card's, and the command line says which (nvboot.kernel).
// The disk image is checked first (CheckDisk): a truncated one would boot
// into a kernel panic.
func VMConfig(dir string, im *Image, o BootOptions) (vm.Config, error) {
	if err := CheckBootable(dir, im); err != nil {
		return vm.Config{}, err
	}
	if err := CheckDisk(dir, im); err != nil {
		return vm.Config{}, err
	}
	pdir := cmp.Or(o.PmemDir, dir)
	k, err := BootKernelOf(dir, im, o)
	if err != nil {
		return vm.Config{}, err
	}
	c := vm.Config{
		Kernel:   k.Path,
		Cmdline:  im.Cmdline,
		MemMiB:   o.MemMiB,
		Accel:    o.Accel,
		CPURate:  o.CPURate,
		PmemAs:   o.pmemAs(),
		Disks:    append([]vm.Disk{{Path: filepath.Join(dir, im.Disk), Storage: o.Storage}}, o.Disks...),
		Forwards: o.Forwards,
		Console:  o.Console,
		Stdin:    o.Stdin,

		TCGCacheMiB: o.TCGCacheMiB,
	}
	if c.MemMiB == 0 {
		c.MemMiB = DefaultMemMiB
	}
	if o.ExtraCmdline != "" {
		c.Cmdline += " " + o.ExtraCmdline
	}
	if im.Initrd != "" {
		c.Initrd = filepath.Join(dir, im.Initrd)
	}
	arm := im.TargetOrDefault() == config.TargetVirt
	if o.SharedText {
		if err := sharedTextBoard(dir, im, &c, o); err != nil {
			return vm.Config{}, err
		}
	}
	if arm {
		if err := armBoard(dir, &c, o); err != nil {
			return vm.Config{}, err
		}
	} else if err := x86Board(dir, &c, o); err != nil {
		return vm.Config{}, err
	}
	if (c.PmemAs == vm.PmemE820 || c.PmemAs == vm.PmemVirtio) && !o.BootDisk && c.Board == vm.BoardPC {
		// Nothing on this board needs ACPI (vm.Config.NoACPI); nvinit
		// ends it with a reset, the one way out without ACPI.
		c.NoACPI = true
		c.Cmdline += " " + contract.OffParam + "=reset"
	}
	if l, ok := GuestDiskLimit(im, o); ok {
		c.Cmdline += " " + l.String()
	}
	if k.From != "" {
		c.Cmdline += " " + contract.KernelFromParam + "=" + k.From
	}
	if !arm {
		c.Firmware = o.Firmware
	}
	if o.BootDisk {
		if o.ExtraCmdline != "" {
			return vm.Config{}, fmt.Errorf("image %s: booted from its disk, the kernel command line is the one built in (%q cannot be added: rebuild with it in KernelCmdline)", dir, o.ExtraCmdline)
		}
		c.BootDisk, c.Kernel, c.Cmdline, c.Initrd = true, "", "", ""
		if o.PmemAs == "" {
			// The disk's command line has no memmap= for e820 regions.
			c.PmemAs = vm.PmemNVDIMM
		}
	}
	for _, p := range attachedPmem(im, o) {
		n := vm.NVDIMM{Path: filepath.Join(pdir, p)}
		if o.SharedText && p == outdir.TextPmemFile {
			n = vm.NVDIMM{Path: filepath.Join(dir, p), ReadOnly: true}
		}
		if _, err := os.Stat(n.Path); err != nil {
			return vm.Config{}, fmt.Errorf("image %s: pmem image: %w", dir, err)
		}
		c.NVDIMMs = append(c.NVDIMMs, n)
	}
	if o.DiskAsPmem {
		if o.PmemDir == "" {
			return vm.Config{}, fmt.Errorf("image %s: the disk as pmem needs a PmemDir for its copy (the image's own directory holds only what the build wrote)", dir)
		}
		if o.BootDisk || o.CPURate == 0 {
			return vm.Config{}, fmt.Errorf("image %s: the disk as pmem is for the device clock's -kernel boots (no BootDisk, a CPURate)", dir)
		}
		n, err := diskPmem(filepath.Join(dir, im.Disk), filepath.Join(pdir, diskPmemFile))
		if err != nil {
			return vm.Config{}, fmt.Errorf("image %s: the disk as pmem: %w", dir, err)
		}
		c.NVDIMMs = append(c.NVDIMMs, vm.NVDIMM{Path: n})
		c.Disks = c.Disks[1:]
		// With no virtio disk left the guest waits for nothing of the
		// host's: every boot of it repeats exactly. Not on virtio-pmem,
		// whose flush requests end when the host's fsync does: with
		// sleep=off the guest's clock jumped to its next timer at each
		// (kv answered 85 to 981 ms after power-on over five boots,
		// measured); with sleep=on the wait counts as the host's time.
		c.Deterministic = len(c.Disks) == 0 && c.PmemAs != vm.PmemVirtio
		// A later root= wins: the root partition on the pmem device.
		c.Cmdline += " root=/dev/" + DiskDevice(im, o) + "p" + strings.TrimPrefix(contract.RootDevice, "/dev/"+contract.Disk)
	}
	return c, nil
}

// armBoard makes c QEMU's virt board for an arm64-virt image. Booted
// directly: the Image entered by QEMU's boot stub (no firmware runs, so no
// Firmware), the pmem regions described by the device tree
// (vm.PmemDeviceTree: the virt board has no e820, and plugs NVDIMMs only
// with ACPI, which it gives a guest only through UEFI firmware), the
// console on the PL011 (vm adds console=ttyAMA0) and power-off through
// PSCI, so nvinit powers off as it does on a board with ACPI (no
// nvboot.off=reset). PmemAs e820, the default of nvboot's -pmem flag,
// means a board's persistent-RAM regions, which on this board are the
// device tree's. With BootDisk: UEFI firmware (AAVMF, or o.Firmware)
// boots the disk's UKI, and the pmem are NVDIMMs the firmware's ACPI
// tables describe (vm.PmemNVDIMM), as on the pc board.
func armBoard(dir string, c *vm.Config, o BootOptions) error {
	if o.Board != "" && o.Board != vm.BoardPC {
		return fmt.Errorf("image %s: board %s: an arm64 image boots on QEMU's virt board; %s is an x86-64 machine", dir, o.Board, o.Board)
	}
	c.Arch = vm.ArchArm64
	if o.BootDisk {
		switch o.PmemAs {
		case "", vm.PmemNVDIMM:
		default:
			return fmt.Errorf("image %s: pmem as %s with its disk booted through UEFI: the arm64 board's UEFI firmware describes it by ACPI, its pmem as NVDIMMs (leave PmemAs empty)", dir, o.PmemAs)
		}
		c.Firmware, c.PmemAs = cmp.Or(o.Firmware, vm.AAVMFCode), vm.PmemNVDIMM
		return nil
	}
	if o.Firmware != "" {
		return fmt.Errorf("image %s: firmware %q: QEMU's boot stub enters an arm64 image's kernel directly, and no firmware runs; UEFI firmware boots the disk (BootDisk: nvboot run -firmware uefi)", dir, o.Firmware)
	}
	switch o.PmemAs {
	case "", vm.PmemE820, vm.PmemDeviceTree:
	default:
		return fmt.Errorf("image %s: pmem as %s: the arm64 board (QEMU's virt) booting its kernel directly gives its pmem as device-tree regions only (it plugs NVDIMMs only with ACPI, which it gives a guest only through UEFI firmware: nvboot run -firmware uefi)", dir, o.PmemAs)
	}
	c.PmemAs = vm.PmemDeviceTree
	return nil
}

// x86Board makes c the x86-64 board o names: QEMU's pc (the default), or
// its microvm, which boots the kernel directly (no BootDisk) and carries
// pmem as e820 regions only (vm.BoardMicrovm says why), with ACPI: it
// powers off through ACPI's sleep register, so nvinit powers off as on a
// board with ACPI. Its virtio-mmio devices' interrupts are ACPI's to
// route, so the image's acpi=noirq, a pc-board trim (BootTrims: its PCI
// link objects), leaves the command line there: with it the kernel finds
// no interrupt for the disk and cannot mount the root (tried).
func x86Board(dir string, c *vm.Config, o BootOptions) error {
	switch o.Board {
	case "", vm.BoardPC:
		c.Board = vm.BoardPC
		return nil
	case vm.BoardMicrovm:
	default:
		return fmt.Errorf("image %s: board %q: want %s or %s", dir, o.Board, vm.BoardPC, vm.BoardMicrovm)
	}
	switch {
	case o.BootDisk:
		return fmt.Errorf("image %s: the microvm board boots the image's kernel directly: no UEFI firmware boots its disk there (use the pc board)", dir)
	case o.Firmware != "":
		return fmt.Errorf("image %s: firmware %q: the microvm board runs its own (QEMU's bios-microvm.bin)", dir, o.Firmware)
	case c.PmemAs != vm.PmemE820:
		return fmt.Errorf("image %s: pmem as %s on the microvm board: it has no device-memory area, so QEMU maps an NVDIMM or a virtio-pmem device nowhere in the guest; its pmem is e820 regions", dir, c.PmemAs)
	}
	c.Board = vm.BoardMicrovm
	c.Cmdline = dropParam(c.Cmdline, "acpi=noirq")
	return nil
}

// dropParam is cmdline without the parameter p, wherever it stands.
func dropParam(cmdline, p string) string {
	f := strings.Fields(cmdline)
	kept := f[:0]
	for _, x := range f {
		if x != p {
			kept = append(kept, x)
		}
	}
	return strings.Join(kept, " ")
}

// diskPmemFile is the disk's copy in PmemDir under DiskAsPmem.
const diskPmemFile = "disk-pmem.img"

// diskPmem copies the disk image src to dst, sparse, padded to 2 MiB, the
// unit a pmem region takes (QEMU refuses a backing file smaller than the
// region). A raw namespace needs no whole memory section, even as an e820
// region, and the kernel maps every byte of it at probe: 128 MiB of padding
// cost 1.7 ms of the boot. The GPT's backup header is then not at the end;
// the kernel uses the primary one and says so only at KERN_WARNING.
func diskPmem(src, dst string) (string, error) {
	const unit = 2 << 20
	st, err := os.Stat(src)
	if err != nil {
		return "", err
	}
	if err := copySparseFile(dst, src); err != nil {
		return "", fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	if err := os.Truncate(dst, (st.Size()+unit-1)/unit*unit); err != nil {
		return "", err
	}
	return dst, nil
}

// StorageInGuest says whether the storage model runs inside the guest:
// under the device clock, where QEMU's throttle would charge a wait the
// guest computes through by its instructions only. nvinit applies it with
// io.max (GuestDiskLimit), whose waits pass on the guest's own timers.
func StorageInGuest(o BootOptions) bool {
	s := o.Storage
	return o.CPURate != 0 && !o.BootDisk && (s.ReadBPS != 0 || s.ReadIOPS != 0 || s.WriteBPS != 0 || s.WriteIOPS != 0)
}

// GuestDiskLimit is the storage model nvinit applies to the image's disk
// (DiskDevice) when StorageInGuest.
func GuestDiskLimit(im *Image, o BootOptions) (contract.DiskLimit, bool) {
	if !StorageInGuest(o) {
		return contract.DiskLimit{}, false
	}
	s := o.Storage
	return contract.DiskLimit{Disk: DiskDevice(im, o), ReadBPS: s.ReadBPS, ReadIOPS: s.ReadIOPS, WriteBPS: s.WriteBPS, WriteIOPS: s.WriteIOPS,
		Backlog: o.DiskAsPmem}, true
}

// DiskDevice is the image's disk as the guest's /sys/block names it: vda,
// or under DiskAsPmem the pmem device after the pmem images.
func DiskDevice(im *Image, o BootOptions) string {
	if !o.DiskAsPmem {
		return contract.Disk
	}
	return fmt.Sprintf("pmem%d", len(attachedPmem(im, o)))
}

// attachedPmem are the image's pmem files a boot with o attaches, in
// order: the kernel region only on a board that boots from it.
func attachedPmem(im *Image, o BootOptions) []string {
	var a []string
	for _, p := range im.Pmem {
		if p != outdir.KernelPmemFile || regionBoard(im, o) {
			a = append(a, p)
		}
	}
	return a
}

// CopyPmem copies the image's pmem images into dst (sparse), for a boot that
// must start from the image as built: a cold first boot of a fresh device.
func CopyPmem(dir string, im *Image, dst string) error {
	for _, p := range im.Pmem {
		if err := copySparseFile(filepath.Join(dst, p), filepath.Join(dir, p)); err != nil {
			return fmt.Errorf("copying %s: %w", p, err)
		}
	}
	return nil
}

// copySparseFile copies src to dst leaving all-zero 64 KiB blocks as holes.
func copySparseFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if err := out.Truncate(st.Size()); err != nil {
		out.Close()
		return err
	}
	buf := make([]byte, 64<<10)
	for off := int64(0); off < st.Size(); {
		n, err := in.ReadAt(buf, off)
		if n > 0 && !zero(buf[:n]) {
			if _, werr := out.WriteAt(buf[:n], off); werr != nil {
				out.Close()
				return werr
			}
		}
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			out.Close()
			return err
		}
	}
	return out.Close()
}

func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
