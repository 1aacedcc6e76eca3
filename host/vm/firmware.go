package vm

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nvboot/nvboot/internal/atomicfile"
)

// Firmware images for Config.Firmware, where Debian installs them.
const (
	// OVMF is EDK II's UEFI firmware for QEMU (Debian package ovmf). With
	// BootDisk it boots the first disk's EFI/BOOT/BOOTX64.EFI, as a board's
	// UEFI firmware boots removable media.
	OVMF = "/usr/share/ovmf/OVMF.fd"
	// OVMFCode and OVMFVars are the same firmware split as a board's flash
	// holds it: the code, and a blank variable store to copy for each
	// board (Config.FirmwareVars, NewFirmwareVars).
	OVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	OVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	// AAVMFCode and AAVMFVars are EDK II's UEFI firmware for QEMU's arm64
	// virt board (Debian package qemu-efi-aarch64), split alike: each a
	// 64 MiB image, the size of the board's two flash chips. With BootDisk
	// it boots the first disk's EFI/BOOT/BOOTAA64.EFI.
	AAVMFCode = "/usr/share/AAVMF/AAVMF_CODE.fd"
	AAVMFVars = "/usr/share/AAVMF/AAVMF_VARS.fd"
	// QBoot is qboot (package qemu-system-data): no option ROMs, no boot
	// menu, straight to the -kernel QEMU hands it.
	QBoot = "/usr/share/qemu/qboot.rom"
)

// bootArgs are the QEMU arguments for the firmware and what it boots: the
// kernel with its command line (after the console settings, what the
// machine needs the kernel to know, and extra, the pmem's memmap=) and
// initramfs, or, with BootDisk, nothing: the firmware finds the boot loader
// on the disks.
func (c Config) bootArgs(accel, extra string) ([]string, error) {
	a, err := firmwareArgs(c.Firmware, c.BootDisk || c.pciINTx())
	if err != nil {
		return nil, err
	}
	if c.FirmwareVars != "" {
		if a, err = flashArgs(c.Firmware, c.FirmwareVars); err != nil {
			return nil, err
		}
	}
	if c.BootDisk {
		if c.Kernel != "" || c.Initrd != "" || c.Cmdline != "" {
			return nil, errors.New("vm: BootDisk boots what is on the disk: Kernel, Initrd and Cmdline must be empty")
		}
		if len(c.Disks) == 0 {
			return nil, errors.New("vm: BootDisk with no disk to boot from")
		}
		if extra != "" {
			return nil, fmt.Errorf("vm: BootDisk: the disk's command line cannot carry %q: give the pmem as NVDIMMs (PmemAs %q)", strings.TrimSpace(extra), PmemNVDIMM)
		}
		return a, nil
	}
	if c.Kernel == "" {
		return nil, errors.New("vm: no kernel (set NVBOOT_KERNEL or run make kernel)")
	}
	a = append(a, "-kernel", c.Kernel, "-append", strings.TrimSpace("console=ttyS0 "+machineCmdline(accel, c)+extra+c.Cmdline))
	if c.Initrd != "" {
		a = append(a, "-initrd", c.Initrd)
	}
	return a, nil
}

// firmwareArgs is the -bios argument for name (see Config.Firmware).
// qboot boots only a -kernel and routes no PCI interrupt, so it is the
// default only when neither is asked of the firmware (notQBoot: BootDisk,
// or Config.pciINTx).
func firmwareArgs(name string, notQBoot bool) ([]string, error) {
	switch name {
	case "seabios":
		return nil, nil
	case "":
		if _, err := os.Stat(QBoot); err == nil && !notQBoot {
			return []string{"-bios", QBoot}, nil
		}
		return nil, nil
	}
	if _, err := os.Stat(name); err != nil {
		return nil, fmt.Errorf("vm: firmware: %w", err)
	}
	return []string{"-bios", name}, nil
}

// pciINTx says whether a device of c's board needs a PCI interrupt line
// that only the firmware's MP table describes: virtio-pmem-pci has no
// MSI-X in QEMU 7.2, and on a board without ACPI the kernel routes its
// INTx by the MP table, where SeaBIOS lists the PCI slots and qboot does
// not ("can't find IRQ for PCI INT A"; the device's flush request then
// never completes, and the first sync of its filesystem hangs: tried).
func (c Config) pciINTx() bool {
	return c.NoACPI && c.PmemAs == PmemVirtio && len(c.NVDIMMs) > 0
}

// flashArgs are the two pflash chips of a UEFI board (Config.FirmwareVars):
// code read-only, the variable store writable.
func flashArgs(code, vars string) ([]string, error) {
	if code == "" || code == "seabios" {
		return nil, fmt.Errorf("vm: a firmware variable store (%s) needs a UEFI firmware's code image as Firmware (e.g. %s), not %q", vars, OVMFCode, code)
	}
	if _, err := os.Stat(vars); err != nil {
		return nil, fmt.Errorf("vm: firmware variable store: %w", err)
	}
	return []string{"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + code,
		"-drive", "if=pflash,format=raw,unit=1,file=" + vars}, nil
}

// UEFI is a board's UEFI firmware split as the board's flash holds it.
type UEFI struct {
	Name    string // OVMF, AAVMF
	Code    string // the code image (Config.Firmware)
	Vars    string // the blank variable store each board's copy starts as (Config.FirmwareVars)
	Package string // the Debian package that installs both
}

// UEFIOf is the UEFI firmware of arch's board (Config.Arch): OVMF on the
// pc board, AAVMF on the virt board.
func UEFIOf(arch string) UEFI {
	if arch == ArchArm64 {
		return UEFI{"AAVMF", AAVMFCode, AAVMFVars, "qemu-efi-aarch64"}
	}
	return UEFI{"OVMF", OVMFCode, OVMFVars, "ovmf"}
}

// Installed says whether both of u's images are there, naming the
// package that installs them when not.
func (u UEFI) Installed() error {
	for _, p := range []string{u.Code, u.Vars} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("no %s (UEFI firmware for QEMU): %w (install Debian package %s)", u.Name, err, u.Package)
		}
	}
	return nil
}

// NewFirmwareVars makes path a blank UEFI variable store for arch's board
// (a copy of UEFIOf(arch).Vars), a new board's NVRAM, unless path already
// is one: a board keeps its variables from boot to boot. A store of
// another size is another firmware's (OVMF's is 528 KiB, AAVMF's 64 MiB)
// and is refused, not replaced. It says whether it made one.
func NewFirmwareVars(arch, path string) (bool, error) {
	u := UEFIOf(arch)
	blank, err := os.Stat(u.Vars)
	if err != nil {
		return false, fmt.Errorf("vm: the blank UEFI variable store: %w (Debian package %s)", err, u.Package)
	}
	if st, err := os.Stat(path); err == nil {
		if st.Size() != blank.Size() {
			return false, fmt.Errorf("vm: firmware variable store %s is %d bytes, %s's is %d: the store of another board's firmware (remove it, and the board starts with blank variables)", path, st.Size(), u.Name, blank.Size())
		}
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("vm: firmware variable store: %w", err)
	}
	b, err := os.ReadFile(u.Vars)
	if err != nil {
		return false, fmt.Errorf("vm: the blank UEFI variable store: %w (Debian package %s)", err, u.Package)
	}
	// Whole or not at all: a store cut short would not be the firmware's.
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return false, fmt.Errorf("vm: firmware variable store: %w", err)
	}
	return true, nil
}
