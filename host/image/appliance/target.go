package appliance

import (
	"debug/elf"
	"fmt"

	"github.com/nvboot/nvboot/format/gpt"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/off2f"
)

// What differs from target to target (config.Target) is here, in one
// place: the boot files the board's firmware reads, its serial console,
// the kernel parameters that trim its boot, and the root partition's type.
// The programs differ only by GOARCH (gobuild.go, programs.go).

// espBoot is the file UEFI firmware boots from removable media on the
// target's machine: the unified kernel image.
func espBoot(t config.Target) string {
	if t.GOARCH() == "arm64" {
		return "EFI/BOOT/BOOTAA64.EFI"
	}
	return ESPBoot
}

// serialConsole is the console= of the target's first serial port, on the
// UKI's command line: x86's 8250 (ttyS0), the virt board's PL011 (ttyAMA0).
func serialConsole(t config.Target) string {
	if t.GOARCH() == "arm64" {
		return "console=ttyAMA0,115200"
	}
	return SerialConsole
}

// BootTrimsArm64 are BootTrims that mean anything to an arm64 kernel: the
// RCU and hash table ones; acpi=noirq, the i8042 probe, no_timer_check and
// noreplace-smp are x86's. Measured on x86 only.
const BootTrimsArm64 = "rcupdate.rcu_expedited=1 dhash_entries=4096 ihash_entries=4096"

// BootTrimsFor are the boot trims of t's kernel command line.
func BootTrimsFor(t config.Target) string {
	if t.GOARCH() == "arm64" {
		return BootTrimsArm64
	}
	return BootTrims
}

// rootType is the root partition's type GUID (the Discoverable Partitions
// Specification's root of t's machine).
func rootType(t config.Target) gpt.GUID {
	if t.GOARCH() == "arm64" {
		return gpt.TypeRootArm64
	}
	return gpt.TypeRootX8664
}

// checkMachine refuses an ELF file at path (the loader) that is not for
// goarch's machine, naming both: an image never mixes machines.
func checkMachine(what, path, goarch string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	defer f.Close()
	want, ok := off2f.MachineOfGOARCH(goarch)
	if !ok {
		return fmt.Errorf("%s: no machine for GOARCH %s", what, goarch)
	}
	if f.Machine != want.ELF() {
		return fmt.Errorf("%s %s is built for %v, the image for %v (GOARCH %s): one image, one machine", what, path, f.Machine, want.ELF(), goarch)
	}
	return nil
}

// Bootable says whether nvboot boots images of t in QEMU (VMConfig, and
// the commands that boot: run, measure, powercut, and the tests that deploy
// and update): amd64-pc's on the pc board, arm64-virt's on the virt board
// (VMConfig picks it by the image's Target). A Raspberry Pi card is
// refused: QEMU's raspi3b runs none of the Pi's GPU firmware, which picks
// the boot partition (autoboot.txt, tryboot) and loads the kernel and
// device tree from it; only the tests play that part
// (internal/testutil/raspi).
func Bootable(t config.Target) error {
	if t == config.TargetRPi {
		return fmt.Errorf("built for %s (target %s, %s): nvboot run, measure and powercut do not boot a Raspberry Pi card: QEMU's raspi3b board runs none of the Pi's firmware, which reads the card's boot partition (autoboot.txt, config.txt, the kernel and device tree); write it to a card with nvboot flash, or build for %s (-arch %s), which QEMU's virt board boots",
			t.GOARCH(), t, t.Board(), config.TargetVirt, config.TargetVirt)
	}
	return nil
}

// CheckBootable is Bootable of the image in dir, the error naming it.
func CheckBootable(dir string, im *Image) error {
	if err := Bootable(im.TargetOrDefault()); err != nil {
		return fmt.Errorf("image %s: %w", dir, err)
	}
	return nil
}
