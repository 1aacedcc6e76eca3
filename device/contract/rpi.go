package contract

import "fmt"

// The Raspberry Pi card: an MBR disk (format/mbr; the Pi 3's boot ROM reads
// no GPT) whose first FAT partition the firmware reads first. With one
// slot it is gokrazy's shape: the boot partition (firmware, kernel, device
// trees, config.txt, cmdline.txt), the root, the data partition holding
// the state. With Slots 2 the first partition holds only what the firmware
// reads before it picks a slot (autoboot.txt, bootcode.bin, the EEPROM
// update files), then each slot's boot partition, and in the extended
// partition each slot's root and the data:
//
//	slots 1: 1 boot  2 root                  3 data
//	slots 2: 1 config  2 boot-a  3 boot-b  (4 extended)  5 root-a  6 root-b  7 data
//
// Partition numbers are Linux's and the firmware's (boot_partition=N).

// RPiDisk is the card as /sys/block names it on every Pi (the SD slot).
const RPiDisk = "mmcblk0"

// The Pi card's partitions beyond the slotted disk's (slots.go).
const (
	PartConfig = "config" // slots 2: autoboot.txt, bootcode.bin, EEPROM files
	PartBoot   = "boot"   // slots 1: the boot partition
	PartRoot   = "root"   // slots 1: the root
)

// RPiDiskID is the disk identifier of every nvboot Pi card, which root=
// names the roots by (PARTUUID=6e76626f-05): the same on every image, so
// a slot written by an update from an image of another hostname still
// finds its root, where a per-image identifier would name a disk the card
// is not. Two nvboot cards in one Pi share it: the kernel takes the first
// it finds.
const RPiDiskID uint32 = 0x6e76626f // "nvbo"

// RPiPart is one partition of the Pi card.
type RPiPart struct {
	Name   string
	Number int // Linux's and the firmware's partition number
}

// RPiPartitions are the Pi card's partitions for slots (1 or 2), in order.
func RPiPartitions(slots int) []RPiPart {
	if slots == 2 {
		return []RPiPart{{PartConfig, 1}, {PartBootA, 2}, {PartBootB, 3}, {PartRootA, 5}, {PartRootB, 6}, {PartData, 7}}
	}
	return []RPiPart{{PartBoot, 1}, {PartRoot, 2}, {PartData, 3}}
}

// RPiPartNumber is the number of partition name on a Pi card with slots;
// 0 when it has none of that name.
func RPiPartNumber(slots int, name string) int {
	for _, p := range RPiPartitions(slots) {
		if p.Name == name {
			return p.Number
		}
	}
	return 0
}

// RPiDevice is the block device of partition name of the Pi card with
// slots; "" when it has none of that name.
func RPiDevice(slots int, name string) string {
	n := RPiPartNumber(slots, name)
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("/dev/%sp%d", RPiDisk, n)
}

// Slot firmware (Slots.Firmware): what picks the slot a boot starts.
const (
	// FirmwareUEFI: Boot#### entries, BootOrder and BootNext (slotboot.go).
	FirmwareUEFI = "uefi"
	// FirmwareTryboot: the Pi firmware's autoboot.txt on the config
	// partition (format/tryboot) and its one-shot tryboot flag, set by
	// rebooting with TrybootReboot.
	FirmwareTryboot = "tryboot"
)

// TrybootReboot is the argument of the reboot (LINUX_REBOOT_CMD_RESTART2)
// that boots the [tryboot] partition once: partition 0 (autoboot.txt
// decides), with the tryboot flag, which the Pi kernel's firmware driver
// hands to the firmware.
const TrybootReboot = "0 tryboot"
