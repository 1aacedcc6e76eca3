// Package tryboot is the Raspberry Pi firmware's A/B switch on the card:
// autoboot.txt, which the firmware reads from the card's first FAT
// partition before anything else, and its rewrite in place. nvboot writes
//
//	[all]
//	tryboot_a_b=1
//	boot_partition=2
//	[tryboot]
//	boot_partition=3
//
// so every boot starts partition 2 (slot A's boot partition) and a boot
// with the firmware's one-shot tryboot flag (Linux's reboot "0 tryboot")
// starts partition 3 (slot B's) once. The commit of slot B swaps the two
// digits. device/update drives it (docs/UPDATE.md); host/image/rpi writes
// the first file.
//
// # Design
//
//   - Rewritten in place, not through a filesystem driver: the appliance
//     never mounts the FAT partition. Both forms of the file are as long
//     (single-digit partitions), so a commit writes two digits inside the
//     file's one sector and changes no directory entry, FAT or length; a
//     power cut leaves the old file or the new one as far as the card
//     writes a sector whole. A rewrite through vfat (truncate, write,
//     fsync) would pass through an empty or half-written file, and an
//     autoboot.txt the firmware cannot read boots partition 1, which
//     holds no kernel.
//   - Locate reads only the boot sector and the root directory, and
//     places only a file that fits in one cluster: its bytes are one
//     extent, found without the FAT. FAT12, 16 and 32 are told apart by
//     their cluster count, as the specification says.
//   - Parse reads as the firmware reads: [all], [none] and [tryboot]
//     sections, a later value winning, and refuses anything else the file
//     could say (another filter, another key, more than 512 bytes), so a
//     file nvboot would rewrite says only what nvboot understands.
//
// # Invariants
//
//   - Marshal and Parse agree, and both committed forms are as long:
//     TestMarshalParse; the firmware's section rules and every refusal,
//     named with its line: TestParse; Parse never panics, and what it
//     accepts re-marshals to the same: FuzzParse.
//   - Locate finds the file where mkfs.vfat and mcopy put it on FAT12, 16
//     and 32, past long names and deleted entries: TestLocateOnRealFAT;
//     Write changes the two digits and nothing else, mtools reads the new
//     file and fsck.vfat finds nothing wrong: TestWriteInPlace; a damaged
//     boot sector, directory entry or looping root directory is named,
//     never followed: TestLocateRefuses, FuzzLocate.
//
// # Limits
//
//   - Root directory files of at most one cluster, by 8.3 name only.
//   - A sector written whole is the card's promise, not this package's:
//     an SD card that tears a sector on a power cut can leave a file the
//     firmware cannot read.
package tryboot
