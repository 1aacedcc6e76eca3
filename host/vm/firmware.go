package vm

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Firmware images for Config.Firmware, where Debian installs them.
const (
	// OVMF is EDK II's UEFI firmware for QEMU (Debian package ovmf). With
	// BootDisk it boots the first disk's EFI/BOOT/BOOTX64.EFI, as a board's
	// UEFI firmware boots removable media.
	OVMF = "/usr/share/ovmf/OVMF.fd"
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
	a, err := firmwareArgs(c.Firmware, c.BootDisk)
	if err != nil {
		return nil, err
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
// qboot boots only a -kernel, so it is the default only without BootDisk.
func firmwareArgs(name string, bootDisk bool) ([]string, error) {
	switch name {
	case "seabios":
		return nil, nil
	case "":
		if _, err := os.Stat(QBoot); err == nil && !bootDisk {
			return []string{"-bios", QBoot}, nil
		}
		return nil, nil
	}
	if _, err := os.Stat(name); err != nil {
		return nil, fmt.Errorf("vm: firmware: %w", err)
	}
	return []string{"-bios", name}, nil
}
