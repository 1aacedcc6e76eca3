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
// kernel with its command line (after the console settings) and initramfs,
// or, with BootDisk, nothing: the firmware finds the boot loader on the
// disks.
func (c Config) bootArgs(accel string) ([]string, error) {
	var a []string
	if c.Firmware != "" {
		if _, err := os.Stat(c.Firmware); err != nil {
			return nil, fmt.Errorf("vm: firmware: %w", err)
		}
		a = append(a, "-bios", c.Firmware)
	}
	if c.BootDisk {
		if c.Kernel != "" || c.Initrd != "" || c.Cmdline != "" {
			return nil, errors.New("vm: BootDisk boots what is on the disk: Kernel, Initrd and Cmdline must be empty")
		}
		if len(c.Disks) == 0 {
			return nil, errors.New("vm: BootDisk with no disk to boot from")
		}
		return a, nil
	}
	if c.Kernel == "" {
		return nil, errors.New("vm: no kernel (set NVBOOT_KERNEL or run make kernel)")
	}
	a = append(a, "-kernel", c.Kernel, "-append", strings.TrimSpace("console=ttyS0 "+machineCmdline(accel)+c.Cmdline))
	if c.Initrd != "" {
		a = append(a, "-initrd", c.Initrd)
	}
	return a, nil
}
