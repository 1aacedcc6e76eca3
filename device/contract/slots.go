package contract

import (
	"fmt"
	"time"
)

// The A/B update (`nvboot update`): a disk laid out with two slots, each a
// root partition and a boot partition holding that slot's unified kernel
// image, and nvinit's side of the test boot.
//
// Each slot's UKI sits in a small FAT partition of its own (type XBOOTLDR,
// the Discoverable Partitions Specification's extended boot loader
// partition), not as a file on the one ESP: the appliance kernel has no
// FAT filesystem, so the device cannot write a file into the ESP, but it
// can write a whole partition as it writes the root. The ESP keeps only
// EFI/BOOT/BOOTX64.EFI, a copy of slot A's UKI, for a board whose NVRAM
// has no entry yet.
//
// docs/UPDATE.md has the A/B update as a whole.

// The slots' partitions, in the order the disk holds them (vda1...).
const (
	PartESP   = "esp"
	PartRootA = "root-a"
	PartRootB = "root-b"
	PartBootA = "boot-a"
	PartBootB = "boot-b"
	PartData  = "data"
)

// SlotPartitions are the partition names of a Slots 2 disk, in order: the
// roots are vda2 and vda3, so slot A's root is RootDevice as in a disk
// with one root.
var SlotPartitions = []string{PartESP, PartRootA, PartRootB, PartBootA, PartBootB, PartData}

// SlotUKI is the path of a slot's UKI on its boot partition.
const SlotUKI = "/EFI/nvboot/nvboot.efi"

// SlotDevice is the block device of one slot's root or boot partition.
func SlotDevice(part string) string {
	for i, p := range SlotPartitions {
		if p == part {
			return fmt.Sprintf("/dev/%s%d", Disk, i+1)
		}
	}
	return ""
}

// RootPart and BootPart name a slot's partitions.
func RootPart(slot string) string { return "root-" + slot }
func BootPart(slot string) string { return "boot-" + slot }

// OtherSlot is the slot an update writes when slot runs.
func OtherSlot(slot string) string {
	if slot == "a" {
		return "b"
	}
	return "a"
}

// Slots is nvinit's side of a Slots 2 image (InitConfig.Slots).
type Slots struct {
	// TestBootDeadline bounds a test boot: every started service must have
	// been marked ready by then, or nvinit reboots into the committed slot.
	TestBootSeconds int
	// Firmware is what picks the slot a boot starts: FirmwareUEFI (the
	// default, "") or FirmwareTryboot (a Raspberry Pi, rpi.go).
	Firmware string `json:",omitempty"`
}

// FirmwareOrDefault is Firmware, FirmwareUEFI when unset.
func (s *Slots) FirmwareOrDefault() string {
	if s.Firmware == "" {
		return FirmwareUEFI
	}
	return s.Firmware
}

// TestBootDeadline is TestBootSeconds as a duration.
func (s *Slots) TestBootDeadline() time.Duration {
	return time.Duration(s.TestBootSeconds) * time.Second
}

// DefaultTestBootDeadline is the test boot's deadline when the image config
// sets none.
const DefaultTestBootDeadline = 2 * time.Minute

// Validate checks s, naming the field.
func (s *Slots) Validate() error {
	var v validator
	if s.TestBootSeconds <= 0 || s.TestBootSeconds > 3600 {
		v.badf("Slots.TestBootSeconds %d: want 1 to 3600", s.TestBootSeconds)
	}
	if f := s.FirmwareOrDefault(); f != FirmwareUEFI && f != FirmwareTryboot {
		v.badf("Slots.Firmware %q: want %s or %s", s.Firmware, FirmwareUEFI, FirmwareTryboot)
	}
	return v.err()
}

// WatchdogDevice is the hardware watchdog nvinit arms on a slotted boot;
// WatchdogTimeout its timeout in seconds, WatchdogPet how often nvinit pets
// it. A hang (kernel or nvinit) resets the board, and a reset boots
// BootOrder's first entry: the committed slot.
const (
	WatchdogDevice  = "/dev/watchdog"
	WatchdogTimeout = 30
	WatchdogPet     = 5 * time.Second
	// RPiWatchdogTimeout is the Pi's: the BCM2835 watchdog counts at most
	// about 16 s, and its driver refuses a longer timeout.
	RPiWatchdogTimeout = 15
)

// EfivarsDir is where nvinit mounts efivarfs.
const EfivarsDir = "/sys/firmware/efi/efivars"

// ImageIDPath holds the image's id on its root: the SHA-256 of its nvinit
// config and MANIFEST, which `nvboot update` finds in image.json.
const ImageIDPath = "/etc/nvboot/image-id"
