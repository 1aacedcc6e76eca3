// Package gpt writes disk images with a GUID partition table (UEFI 2.10,
// chapter 5): a protective MBR, the primary header and entry array, the
// partitions' contents, and the backup array and header at the end. Read
// checks a table (the appliance's tests and the flasher read images back);
// Fit moves the backup to the end of a bigger device when an image is
// flashed onto it.
//
// # Design
//
//   - Reproducible: GUIDs are derived from a seed (the appliance's hostname
//     and layout) and each partition's name by SHA-256, shaped as version 4,
//     never random; the same inputs give the same bytes.
//   - Partitions start on 1 MiB boundaries, as partitioning tools place
//     them; 128 entries of 128 bytes.
//   - Type GUIDs are the Discoverable Partitions Specification's where one
//     exists (the ESP, the x86-64 and arm64 roots, XBOOTLDR for an A/B
//     slot's boot partition), so firmware and tools recognise the
//     partitions.
//   - The image is written by format/diskimage, as format/mbr's: a
//     temporary file beside it, renamed into place, so a failure leaves no
//     partial image. The bytes are pinned: TestWriteFrozen.
//   - Fit changes only the tables: the partitions stay where they are, and
//     the head becomes what Write would have made for the bigger disk.
//
// # Invariants
//
//   - sgdisk -v finds nothing wrong with what Write makes:
//     TestWriteCheckedBySgdisk.
//   - Read gives back what Write placed, and refuses a table whose MBR,
//     header or CRCs are wrong: TestRead.
//   - A missing source, a source larger than its partition or an empty
//     partition without a size is refused naming the image, and nothing is
//     left behind: TestRejects.
//   - GUIDs format as the specification writes them: TestGUIDString.
//   - Fit is held by host/image/flash's tests (TestFlashOntoBiggerFile).
//
// # Limits
//
//   - 512-byte sectors only.
//   - Read checks the primary table; the backup is not read.
package gpt
