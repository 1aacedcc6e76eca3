// Package fsdax builds images of persistent memory that Linux sees as fsdax
// namespaces from the first boot, with no ndctl or sysfs step in the guest:
// the NVDIMM_PFN_INFO block the kernel's libnvdimm would write
// (drivers/nvdimm/pfn_devs.c, nd_pfn_init; struct nd_pfn_sb) is written on
// the host 4 KiB into the namespace, followed by a filesystem at the data
// offset it names, sparse.
//
// It serves label-less namespaces: QEMU's NVDIMM without label-size, or a
// memmap=SIZE!START region, whose namespace uuid is all zeros. The block
// written is version 1.4, mode RAM, 2 MiB alignment, data offset 2 MiB,
// page size 4096, with its Fletcher-64 checksum (pfn.go has the fields).
// The pfn uuid is derived from the filesystem's SHA-256, so the same inputs
// give the same image; the image is written through internal/atomicfile.
// The appliance sizes its images as the filesystem plus 2 MiB, rounded up
// to 128 MiB (the text store's room for deploys).
//
// # Design
//
//   - Written on the host over set up in the guest: the sysfs switch that
//     ndctl create-namespace -m fsdax does (unbind the namespace, give the
//     idle pfn device a uuid, align and mode, bind) makes the kernel write
//     the block itself, but a host-written block makes the image
//     reproducible and the first boot like every other. A flashed board's
//     pmem starts blank, so nvinit still does the sysfs switch on a blank
//     raw namespace.
//   - Mode RAM over mode pmem: the struct pages (64 bytes per 4 KiB page)
//     take DRAM, so the whole pmem holds data and the data offset stays at
//     2 MiB.
//   - 2 MiB alignment: DAX can then map 2 MiB extents with one PMD entry.
//
// # Invariants
//
//   - The block is byte for byte the one the kernel writes: TestMatchesTheKernel
//     compares it with a block Linux 6.1 wrote for a 256 MiB namespace
//     (testdata/kernel-pfn-256M-uuid-6e7662f0.bin).
//   - Parse refuses a block that is not one, never panics: TestParseRejects,
//     FuzzParse.
//   - The filesystem at the data offset is intact (e2fsck agrees):
//     TestWriteImage; bad sizes and inputs are refused, nothing written:
//     TestWriteImageRejects.
//   - The appliance kernel finds /dev/pmem0 as fsdax and mounts it
//     dax=always: TestKernelSeesFsdax (QEMU).
//
// # Limits
//
//   - Label-less namespaces only, starting 2 MiB-aligned in physical
//     memory; sizes are multiples of 2 MiB.
//   - Only mode RAM and 4 KiB pages are written.
package fsdax
