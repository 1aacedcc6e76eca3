package vm

import (
	"bytes"
	"cmp"
	"context"
	"debug/pe"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	nvkernel "github.com/nvboot/nvboot/host/kernel"
)

// The boards (Config.Arch), named as host/kernel names the kernels.
const (
	ArchX86_64 = nvkernel.ArchX86_64 // QEMU's pc machine
	ArchArm64  = nvkernel.ArchArm64  // QEMU's virt machine
)

// PmemDeviceTree is the arm64 board's pmem (Config.PmemAs): each region
// is memory after the RAM, backed by its file, that the board's device
// tree describes as a "pmem-region" (the kernel's of_pmem driver), the way
// a board with persistent RAM and no firmware tables describes it; mem=
// keeps the kernel's page allocator off it. The x86 e820 regions' twin.
const PmemDeviceTree = "devicetree"

// arm64CPU is the arm64 board's core: the Cortex-A76 of the Raspberry Pi
// 5, an ARMv8.2 core with DCPoP, so pmem's DC CVAP runs as on the board.
// Over QEMU's max, which adds what no board of ours has and TCG emulates
// slowly (pointer authentication, SVE, MTE); over the Pi 3's Cortex-A53,
// an ARMv8.0 core without DC CVAP.
const arm64CPU = "cortex-a76"

// arm64RAMBase is where the virt machine's RAM starts; the pmem regions
// follow it.
const arm64RAMBase = 0x4000_0000

// arm64InitrdOffset is how far into the RAM QEMU puts the initramfs (and
// the device tree after it): half the RAM, at most 128 MiB
// (hw/arm/boot.c). QEMU counts the pmem regions as RAM there, so vm checks
// that both stay in the RAM proper.
func arm64InitrdOffset(ramMiB int64) int64 { return min(ramMiB<<20/2, 128<<20) }

// arm64DTBRoom is what the device tree QEMU puts after the initramfs takes
// at most (QEMU's own is 1 MiB; the pmem nodes add bytes).
const arm64DTBRoom = 2 << 20

// argsArm64 is the QEMU command line of the arm64 board: virt with GICv2
// (the GIC-400 of the Raspberry Pi 4 and 5, and QEMU's default), the PL011
// console, PSCI for power-off and reset, and either QEMU's own boot stub
// entering the Image (no firmware) or, on a UEFI board (uefi), AAVMF
// booting the disk.
func (c Config) argsArm64(accel string) ([]string, error) {
	uefi := c.uefiArm64()
	switch {
	case accel != "tcg":
		return nil, fmt.Errorf("vm: the arm64 board runs under TCG (-accel %s: this x86 host cannot run an arm64 guest with KVM)", accel)
	case c.NoACPI:
		return nil, errors.New("vm: NoACPI is the pc board's: the arm64 board boots its kernel with a device tree and no ACPI already")
	case c.SmallPageRAM || c.FreePageReporting:
		return nil, errors.New("vm: SmallPageRAM or FreePageReporting on the arm64 board: the pc board's only (the arm64 kernel has no virtio-balloon)")
	case uefi && !c.BootDisk:
		return nil, errors.New("vm: UEFI firmware on the arm64 board boots its disk (BootDisk): with a kernel to boot directly, leave Firmware and FirmwareVars empty (QEMU's boot stub enters it)")
	case !uefi && c.Kernel == "":
		return nil, errors.New("vm: no kernel (set NVBOOT_KERNEL_ARM64 or run kernel-config/build.sh -arch arm64)")
	}
	mem := int64(cmp.Or(c.MemMiB, 256))
	var pm pmemSetup
	var err error
	if uefi {
		pm, err = c.pmemArgsArm64UEFI(int(mem))
	} else {
		pm, err = c.pmemArgsArm64(mem)
	}
	if err != nil {
		return nil, err
	}
	if c.Initrd != "" && len(c.NVDIMMs) > 0 {
		st, err := os.Stat(c.Initrd)
		if err != nil {
			return nil, fmt.Errorf("vm: initramfs: %w", err)
		}
		if arm64InitrdOffset(mem)+st.Size()+arm64DTBRoom > mem<<20 {
			return nil, fmt.Errorf("vm: initramfs %s (%d bytes) does not fit in %d MiB of RAM before the pmem: QEMU would load it onto the pmem (give more RAM)", c.Initrd, st.Size(), mem)
		}
	}
	a := []string{"-machine", "virt,gic-version=2" + pm.machine, "-accel", c.accelArg(accel), "-cpu", arm64CPU, "-smp", strconv.Itoa(cmp.Or(c.CPUs, 1))}
	if a, err = c.clockArgs(a, accel); err != nil {
		return nil, err
	}
	a = c.commonArgs(a)
	if uefi {
		fw, err := c.firmwareArm64()
		if err != nil {
			return nil, err
		}
		a = append(a, fw...)
	} else {
		a = append(a, "-kernel", c.Kernel, "-append", strings.TrimSpace("console=ttyAMA0 "+pm.cmdline+c.Cmdline))
		if c.Initrd != "" {
			a = append(a, "-initrd", c.Initrd)
		}
	}
	a = append(a, pm.args...)
	return c.deviceArgs(a)
}

// uefiArm64 says whether c is an arm64 board with UEFI firmware: one that
// boots its disk (BootDisk) or has a firmware or variable store given.
func (c Config) uefiArm64() bool {
	return c.Arch == ArchArm64 && (c.BootDisk || c.Firmware != "" || c.FirmwareVars != "")
}

// firmwareArm64 are the arguments of the arm64 board's UEFI firmware:
// Firmware (AAVMFCode when empty) as -bios, or with FirmwareVars as the
// two flash chips; the disk it boots, with nothing for the kernel (the
// command line is the disk's UKI's).
//
// -boot menu=on,splash-time=0: AAVMF waits 5 s for a key (its
// PcdPlatformBootTimeOut) before it boots a disk, unless QEMU gives it
// the wait (fw_cfg etc/boot-menu-wait), which QEMU 7.2 does only with
// menu=on; splash-time=0 makes the wait 0, and no menu shows. The
// kernel's EFI entry came 5.43 s after power-on with the wait, 0.43 s
// without (the device clock, 1 GIPS: TestArm64UEFIEntry).
func (c Config) firmwareArm64() ([]string, error) {
	switch {
	case c.Firmware == "seabios" || c.Firmware == QBoot:
		return nil, fmt.Errorf("vm: firmware %q is the pc board's: the arm64 board runs UEFI firmware (%s)", c.Firmware, AAVMFCode)
	case c.Kernel != "" || c.Initrd != "" || c.Cmdline != "":
		return nil, errors.New("vm: BootDisk boots what is on the disk: Kernel, Initrd and Cmdline must be empty")
	case len(c.Disks) == 0:
		return nil, errors.New("vm: BootDisk with no disk to boot from")
	}
	code := cmp.Or(c.Firmware, AAVMFCode)
	a := []string{"-boot", "menu=on,splash-time=0"}
	if c.FirmwareVars != "" {
		f, err := flashArgs(code, c.FirmwareVars)
		if err != nil {
			return nil, err
		}
		return append(a, f...), nil
	}
	if _, err := os.Stat(code); err != nil {
		return nil, fmt.Errorf("vm: firmware: %w (Debian package qemu-efi-aarch64)", err)
	}
	return append(a, "-bios", code), nil
}

// pmemArgsArm64UEFI gives the UEFI board its pmem as NVDIMMs, which the
// firmware's ACPI tables describe (NFIT), as the pc board's: the firmware
// hands the kernel ACPI and no device tree, so there are no device-tree
// regions, and QEMU's virt machine plugs NVDIMMs only when it runs
// firmware (it builds their ACPI tables for it).
func (c Config) pmemArgsArm64UEFI(memMiB int) (pmemSetup, error) {
	if len(c.NVDIMMs) > 0 {
		switch c.PmemAs {
		case "", PmemNVDIMM:
		case PmemDeviceTree:
			return pmemSetup{}, errors.New("vm: pmem as device-tree regions on the arm64 board with UEFI firmware: the firmware gives the kernel ACPI tables, not the board's device tree (use PmemNVDIMM)")
		default:
			return pmemSetup{}, fmt.Errorf("vm: PmemAs %q on the arm64 board with UEFI firmware: want %s", c.PmemAs, PmemNVDIMM)
		}
	}
	c.PmemAs = PmemNVDIMM
	return c.pmemArgs(memMiB)
}

// pmemRegion is one pmem region in the guest's physical memory.
type pmemRegion struct{ addr, size uint64 }

// pmemArgsArm64 lays out the arm64 board's memory: the RAM, then each
// region backed by its file, each a NUMA node of its own (QEMU places the
// nodes one after the other from the RAM's base). The kernel gets mem=,
// so that it takes only the first node as RAM, and finds the regions in
// the device tree (boardDTB).
func (c Config) pmemArgsArm64(memMiB int64) (pmemSetup, error) {
	var p pmemSetup
	sizes, err := c.nvdimmSizes()
	if err != nil {
		return p, err
	}
	if len(sizes) == 0 {
		p.args = []string{"-m", fmt.Sprintf("%dM", memMiB)}
		return p, nil
	}
	switch c.PmemAs {
	case "", PmemDeviceTree:
	case PmemNVDIMM:
		return p, errors.New("vm: pmem as NVDIMMs on the arm64 board booting its kernel directly: QEMU's virt machine plugs NVDIMMs only with ACPI, which it gives a guest only through UEFI firmware (use PmemDeviceTree, or boot the disk through UEFI: BootDisk)")
	case PmemE820:
		return p, errors.New("vm: pmem as e820 regions is the pc board's: the arm64 board has no e820 (use PmemDeviceTree)")
	case PmemVirtio:
		return p, errors.New("vm: pmem as virtio-pmem on the arm64 board: Debian 12's QEMU 7.2 builds virtio-pmem for x86 only (use PmemDeviceTree)")
	default:
		return p, fmt.Errorf("vm: PmemAs %q on the arm64 board: want %s", c.PmemAs, PmemDeviceTree)
	}
	// As on x86: the kernel adds memory in 128 MiB sections and pmem in
	// 2 MiB subsections, so the RAM must end on a section.
	const section = 128 << 20
	if memMiB<<20%section != 0 {
		return p, fmt.Errorf("vm: %d MiB of RAM: the pmem regions start after the RAM, which must then be a multiple of 128 MiB", memMiB)
	}
	p.args = append(p.args, "-object", fmt.Sprintf("memory-backend-ram,id=ram,size=%dM", memMiB), "-numa", "node,memdev=ram")
	off := memMiB << 20
	for i, n := range c.NVDIMMs {
		p.args = append(p.args,
			"-object", fmt.Sprintf("memory-backend-file,id=pm%d,share=on,mem-path=%s,size=%d", i, n.Path, sizes[i]),
			"-numa", fmt.Sprintf("node,memdev=pm%d", i))
		off += sizes[i]
	}
	p.args = append(p.args, "-m", fmt.Sprintf("%dM", off>>20))
	p.cmdline = fmt.Sprintf("mem=%dM ", memMiB)
	return p, nil
}

// pmemRegionsArm64 is where pmemArgsArm64 puts the regions.
func (c Config) pmemRegionsArm64() ([]pmemRegion, error) {
	sizes, err := c.nvdimmSizes()
	if err != nil {
		return nil, err
	}
	addr := uint64(arm64RAMBase) + uint64(cmp.Or(c.MemMiB, 256))<<20
	var r []pmemRegion
	for _, s := range sizes {
		r = append(r, pmemRegion{addr, uint64(s)})
		addr += uint64(s)
	}
	return r, nil
}

// boardDTB writes, in dir, the device tree of the machine args describe,
// with a pmem-region node for each of c's regions, for -dtb. QEMU makes
// the tree (-machine dumpdtb: it builds the machine, writes its tree and
// exits); on the real boot it replaces the tree's memory nodes and /chosen
// as it does for its own. The tree is passed even without pmem, because
// it is compact: QEMU pads its own to 1 MiB, which the kernel checksums
// whole (CRC32, twice) early in its boot; init started 8.6 ms sooner
// with the compact tree (35.3 against 43.9 ms after power-on at 1 GIPS).
func (c Config) boardDTB(ctx context.Context, qemu string, args []string, dir string) (string, error) {
	dump := filepath.Join(dir, "virt.dtb")
	cmd := exec.CommandContext(ctx, qemu, append(append([]string(nil), args...), "-machine", "dumpdtb="+dump)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("vm: the arm64 board's device tree (%s -machine dumpdtb): %w: %s", qemu, err, strings.TrimSpace(string(out)))
	}
	dtb, err := os.ReadFile(dump)
	if err != nil {
		return "", fmt.Errorf("vm: the arm64 board's device tree: %w", err)
	}
	regions, err := c.pmemRegionsArm64()
	if err != nil {
		return "", err
	}
	if dtb, err = fdtAddPmem(dtb, regions); err != nil {
		return "", fmt.Errorf("vm: the arm64 board's device tree: %w", err)
	}
	out := filepath.Join(dir, "pmem.dtb")
	if err := os.WriteFile(out, dtb, 0o644); err != nil {
		return "", fmt.Errorf("vm: %w", err)
	}
	return out, nil
}

// The arm64 entry probe prints its line on the PL011, whose data register
// is the first word of the virt machine's UART at 0x09000000.
const arm64EntryPrefix = "NVBOOT-ENTRY "

// arm64EntryCode, put at arm64EntryCodeOffset of an Image, reads the
// virtual counter (CNTVCT_EL0: under -icount the guest's clock since
// power-on) and its frequency (CNTFRQ_EL0), prints "NVBOOT-ENTRY <count>
// <frequency>" in hex on the UART and powers off through PSCI
// (SYSTEM_OFF by HVC, the virt machine's conduit). Assembled by
// aarch64-linux-gnu-as from:
//
//		mrs  x0, cntvct_el0;  mrs x1, cntfrq_el0
//		mov  x2, #0x9000000;  adr x3, msg
//	1:	ldrb w4, [x3], #1;    cbz w4, 2f;  strb w4, [x2];  b 1b
//	2:	mov  x5, x0;  bl hex;  mov w4, #' ';  strb w4, [x2]
//		mov  x5, x1;  bl hex;  mov w4, #'\n'; strb w4, [x2]
//		mov  x0, #0x84000008;  hvc #0
//	3:	wfi;  b 3b
//	hex:	mov  x6, #60
//	4:	lsr x4, x5, x6;  and x4, x4, #0xf
//		add x7, x4, #'0';  add x8, x4, #'a'-10;  cmp x4, #10;  csel x4, x7, x8, lo
//		strb w4, [x2];  subs x6, x6, #4;  b.ge 4b;  ret
//	msg:	.asciz "NVBOOT-ENTRY "
var arm64EntryCode = []byte{
	0x40, 0xe0, 0x3b, 0xd5, 0x01, 0xe0, 0x3b, 0xd5, 0x02, 0x20, 0xa1, 0xd2,
	0xa3, 0x03, 0x00, 0x10, 0x64, 0x14, 0x40, 0x38, 0x64, 0x00, 0x00, 0x34,
	0x44, 0x00, 0x00, 0x39, 0xfd, 0xff, 0xff, 0x17, 0xe5, 0x03, 0x00, 0xaa,
	0x0c, 0x00, 0x00, 0x94, 0x04, 0x04, 0x80, 0x52, 0x44, 0x00, 0x00, 0x39,
	0xe5, 0x03, 0x01, 0xaa, 0x08, 0x00, 0x00, 0x94, 0x44, 0x01, 0x80, 0x52,
	0x44, 0x00, 0x00, 0x39, 0x00, 0x01, 0x80, 0xd2, 0x00, 0x80, 0xb0, 0xf2,
	0x02, 0x00, 0x00, 0xd4, 0x7f, 0x20, 0x03, 0xd5, 0xff, 0xff, 0xff, 0x17,
	0x86, 0x07, 0x80, 0xd2, 0xa4, 0x24, 0xc6, 0x9a, 0x84, 0x0c, 0x40, 0x92,
	0x87, 0xc0, 0x00, 0x91, 0x88, 0x5c, 0x01, 0x91, 0x9f, 0x28, 0x00, 0xf1,
	0xe4, 0x30, 0x88, 0x9a, 0x44, 0x00, 0x00, 0x39, 0xc6, 0x10, 0x00, 0xf1,
	0x0a, 0xff, 0xff, 0x54, 0xc0, 0x03, 0x5f, 0xd6, 0x4e, 0x56, 0x42, 0x4f,
	0x4f, 0x54, 0x2d, 0x45, 0x4e, 0x54, 0x52, 0x59, 0x20, 0x00,
}

// arm64EntryCodeOffset is where the probe goes: right after the Image's
// 64-byte header (over the EFI stub's PE header, which a -kernel boot never
// reads), reached by a branch at the Image's first instruction (code0).
const arm64EntryCodeOffset = 0x40

// The arm64 Image header (Documentation/arm64/booting.rst): the magic
// "ARM\x64" at 0x38.
const (
	arm64MagicOffset = 0x38
	arm64Magic       = "ARM\x64"
)

// isArm64Image says whether kernel has the arm64 Image header.
func isArm64Image(kernel []byte) bool {
	return len(kernel) >= 0x40 && string(kernel[arm64MagicOffset:arm64MagicOffset+4]) == arm64Magic
}

// entryImageArm64 is an arm64 Image whose first instruction branches to
// the probe: the loader (QEMU's boot stub) does for it what it does for the
// kernel, the same bytes loaded and entered at the same place.
func entryImageArm64(kernel []byte) ([]byte, error) {
	if !isArm64Image(kernel) || len(kernel) < arm64EntryCodeOffset+len(arm64EntryCode) {
		return nil, errors.New("not an arm64 Image (no \"ARM\\x64\" magic at 0x38)")
	}
	k := append([]byte(nil), kernel...)
	binary.LittleEndian.PutUint32(k, 0x14000000|arm64EntryCodeOffset/4) // b +0x40
	copy(k[arm64EntryCodeOffset:], arm64EntryCode)
	return k, nil
}

// entryImageArm64EFI is an arm64 Image whose EFI entry point (the PE
// header's AddressOfEntryPoint: the kernel's EFI stub) is the probe: UEFI
// firmware that starts the Image as an EFI application runs the probe
// where the stub would start, so it reports when the firmware handed over
// (its UART and PSCI are the board's, which the firmware leaves mapped).
func entryImageArm64EFI(kernel []byte) ([]byte, error) {
	if !isArm64Image(kernel) {
		return nil, errors.New("not an arm64 Image (no \"ARM\\x64\" magic at 0x38)")
	}
	f, err := pe.NewFile(bytes.NewReader(kernel))
	if err != nil {
		return nil, fmt.Errorf("no PE header (a kernel without CONFIG_EFI_STUB?): %w", err)
	}
	oh, ok := f.OptionalHeader.(*pe.OptionalHeader64)
	if !ok || f.Machine != pe.IMAGE_FILE_MACHINE_ARM64 {
		return nil, fmt.Errorf("PE header of machine %#x: want an arm64 PE32+ image", f.Machine)
	}
	for _, sec := range f.Sections {
		rva := oh.AddressOfEntryPoint
		if rva < sec.VirtualAddress || rva-sec.VirtualAddress+uint32(len(arm64EntryCode)) > sec.Size {
			continue
		}
		off := int(sec.Offset + rva - sec.VirtualAddress)
		if off+len(arm64EntryCode) > len(kernel) {
			break
		}
		k := append([]byte(nil), kernel...)
		copy(k[off:], arm64EntryCode)
		return k, nil
	}
	return nil, fmt.Errorf("the EFI entry point %#x is in no section of the file", oh.AddressOfEntryPoint)
}

// readEntryArm64 boots c, the probe Image on the virt board: its line on
// the console gives the counter and its frequency at the kernel's entry.
func readEntryArm64(ctx context.Context, c Config, _ string) (time.Duration, error) {
	m, err := Start(ctx, c)
	if err != nil {
		return 0, err
	}
	if err := m.Wait(ctx); err != nil {
		m.Kill()
		return 0, fmt.Errorf("vm: kernel entry probe: the probe kernel did not power off (%v)", err)
	}
	for _, l := range m.Lines() {
		rest, ok := strings.CutPrefix(l.Text, arm64EntryPrefix)
		if !ok {
			continue
		}
		var count, freq uint64
		if _, err := fmt.Sscanf(rest, "%x %x", &count, &freq); err != nil || freq == 0 {
			return 0, fmt.Errorf("vm: kernel entry probe: bad line %q", l.Text)
		}
		return counterDuration(count, freq), nil
	}
	return 0, fmt.Errorf("vm: kernel entry probe: no %q line on the console:\n%s", strings.TrimSpace(arm64EntryPrefix), m.ConsoleTail(10))
}

// counterDuration is count ticks of a counter running at freq Hz.
func counterDuration(count, freq uint64) time.Duration {
	sec, rem := count/freq, count%freq
	return time.Duration(sec)*time.Second + time.Duration(rem*uint64(time.Second)/freq)
}
