// Package flash writes an appliance disk image onto a device (an SD card,
// eMMC, a USB stick, or a regular file standing in for one) and verifies it:
// nvboot flash DIR TARGET. Only disk.img is written; nvinit provisions the
// blank pmem at the first boot from the copies on the root filesystem.
//
// # Design
//
// Careful in the ways dd is not:
//
//   - The target is checked before a byte is written: its kind, its size,
//     that no partition of it is mounted (/proc/self/mountinfo), that the
//     kernel does not hold it (O_EXCL), that it is neither the image itself
//     nor the device that holds the image, and that it is the same file
//     when the write starts as when it was checked.
//   - A block device needs confirmation (-yes). A regular file is
//     overwritten without it only when it is new, empty, all zeros or
//     already a disk image, and a file of an image directory never.
//   - The old partition tables are wiped first and the new table written
//     last, so an interrupted flash leaves a device without a table, never
//     one whose table points at half-written partitions.
//   - A regular file is written to a temporary file beside it that replaces
//     it only once written and verified, so an interrupted flash leaves the
//     old file as it was.
//   - The GPT backup moves to the end of a bigger device (gpt.Fit); an MBR
//     disk (a Raspberry Pi card, format/mbr) has none to move.
//   - Everything written is read back past the page cache and compared.
//
// # Invariants
//
//   - Nothing is written to a target that fails a check:
//     TestFlashRefusesBadInput, TestFlashRefusesSmallOrMountedDevice,
//     TestFlashRefusesImageDirectory, TestFlashFileTargets,
//     TestFlashTargetChangedMeanwhile, TestFlashThroughSymlink.
//   - An interrupted flash leaves the old file, or a device with no table:
//     TestFlashInterruptedKeepsFile, TestFlashInterruptedDeviceHasNoTable.
//   - What is written reads back as the image, on a bigger target with the
//     backup at its end: TestFlashOntoBiggerFile, TestFlashBlockDevice (a
//     loop device, as root), TestFlashCreatesFile; a Pi's MBR card, and one
//     cut short refused: TestFlashMBRCard.
//   - The command: TestFlashCommand, TestFlashNewFile, TestFlashKeepsFiles
//     (host/nvbootcmd).
//
// # Limits
//
//   - The pmem is not written: a flashed board's pmem starts blank and is
//     provisioned at its first boot.
//   - Linux only (mountinfo, O_EXCL on block devices, page cache bypass).
package flash
