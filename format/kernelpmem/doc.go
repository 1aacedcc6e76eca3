// Package kernelpmem is the kernel region: a persistent-memory region that
// holds the appliance's kernel uncompressed (x86's PVH vmlinux, or the
// arm64 Image), so that the firmware copies it from memory into place
// instead of reading it from the card (and, on x86, the kernel inflating a
// compressed bzImage).
//
// Layout: a 4 KiB header, then the kernel's bytes.
//
//	0   8  magic "NVBKRN01"
//	8   8  length of the kernel, little-endian
//	16 32  SHA-256 of the kernel
//	48     zeros up to 4096
//
// On the appliance the region is /dev/pmem2 (pmem-kernel.img, 32 MiB). nvboot build writes it; nvinit rewrites it after a boot
// from the card; the firmware (host/image/appliance's ChooseKernel, which
// plays a board's firmware in QEMU) boots it only when its header is valid,
// its bytes hash to the header's SHA-256 and that hash is the image's.
//
// # Design
//
//   - An uncompressed kernel in pmem over the card's compressed bzImage: on
//     the device clock the card's 3.16 MB bzImage costs 75 ms to read at
//     the sd model's 40 MiB/s and about 25 ms to inflate; copied from pmem
//     the kernel's 10.7 MB of segments cost 10 ms at 1 GiB/s, and nothing is
//     inflated (docs/BENCHMARKS.md). An arm64 Image is uncompressed on the
//     card too: the region saves its read from the card, 6.8 MiB at
//     40 MiB/s.
//   - Header last: Write zeroes and syncs the header, writes and syncs the
//     kernel, then writes and syncs the header. A cut at any point leaves the
//     old kernel or a region nothing boots, never a header over a part.
//   - Checked whole on every read: nothing in the region is trusted before
//     the hash matches, so a blank, damaged or cut-short region makes the
//     firmware boot the card's kernel instead.
//
// # Invariants
//
//   - What Write writes, Read returns: TestWriteRead; a kernel that does not
//     fit is refused: TestWriteRefusesMisfit.
//   - A write cut after each step reads as the old kernel or is refused:
//     TestWriteCut.
//   - Damage anywhere is refused: TestReadRefusesDamage; the header parser
//     never panics: FuzzParseHeader.
//
// # Limits
//
//   - A board needs a loader that reads the region (U-Boot's bootm of an
//     image at a memory address, or an EFI application); nvboot ships
//     neither, so on real hardware the card's UKI is what boots, and the
//     region is the VM runner's model of such a board.
//   - The region holds one kernel; an image with A/B slots is built without
//     it.
package kernelpmem
