// Package mbr writes and reads disk images with an MBR partition table (the
// DOS label): up to four primary partitions in the first sector, and
// logical partitions in an extended partition, each behind an extended boot
// record (EBR) that links to the next. It is the table of a Raspberry Pi
// card (host/image/rpi): the boot ROM of a Pi 3 and Zero 2 W reads only the
// MBR, looking for the first FAT partition holding bootcode.bin, and a GPT
// disk's protective MBR shows it none. The Pi 4 and 5 EEPROM bootloader
// reads GPT too, but tryboot's boot_partition numbers MBR partitions, and
// one table must boot every Pi.
//
// # Design
//
//   - Reproducible: the disk identifier (bytes 440-443, what PARTUUID=
//     names) is the caller's; nothing is random or dated.
//   - Partitions start on 1 MiB boundaries; a logical partition starts
//     1 MiB after its EBR, as sfdisk and fdisk place them. Logical
//     partitions come after the primary ones; the extended partition
//     takes the next primary entry, and its logical partitions are
//     numbered 5, 6, ... as Linux numbers them.
//   - Type bytes: FAT32 with LBA (0C) for what the Pi firmware boots,
//     Linux (83) for the rest, extended with LBA (0F) for the container,
//     05 for the links between EBRs. The CHS fields are filled as
//     partitioning tools fill them (255 heads, 63 sectors); nothing reads
//     them.
//   - The image is written by format/diskimage, as format/gpt's: a
//     failure leaves no partial image. The bytes are pinned:
//     TestWriteFrozen.
//   - Read follows the EBR chain only forwards, inside the extended
//     partition, for at most 128 logical partitions: a damaged or hostile
//     chain ends with an error, never a loop.
//
// # Invariants
//
//   - sfdisk --verify finds nothing wrong with what Write makes, and
//     sfdisk --json sees each partition where Write put it, the extended
//     one as type 0F: TestWriteCheckedBySfdisk. sgdisk -v does not apply
//     (it checks GPT; on an MBR disk it checks a conversion).
//   - Read gives back what Write placed: TestWriteCheckedBySfdisk,
//     TestPrimaryOnly; it refuses and names a missing signature, a GPT
//     disk, overlapping or empty entries, a logical partition outside
//     the extended one and an EBR chain that loops or is cut short:
//     TestReadRefuses; and never panics or loops: FuzzRead.
//   - Too many primary partitions, a primary after a logical one, a
//     missing or too large source, a partition without a size or of a
//     container's type, and disk identifier 0 are refused naming the
//     image, leaving nothing behind: TestRejects.
//
// # Limits
//
//   - 512-byte sectors, disks up to 2 TiB (32-bit LBAs).
//   - No boot code in the MBR: the Pi's firmware needs none, a PC's BIOS
//     would.
package mbr
