// Package kernel finds the appliance kernel (a bzImage) for the commands,
// the tests and the benchmarks, and the uncompressed PVH vmlinux built with
// it. kernel-config/README.md describes the kernel itself.
//
// # Design
//
// One function, Find, in one order: the explicit paths first (-kernel, then
// the config's KernelPath), then $NVBOOT_KERNEL, then kernel-config/build.sh
// in the checkout, which caches the kernel outside the checkout and builds
// a missing one only when the caller asks (Lookup.Build: the nvboot
// commands and bench/exec do; the guest benchmarks through host/guestrun
// take a cached one only; host/vm/vmtest gives no checkout, so a test
// skips when $NVBOOT_KERNEL is unset). One order over each tool looking on its own: a kernel named
// anywhere is the same kernel everywhere, and a plain go test never starts a
// ten-minute build.
//
// Whatever is found must be an x86 bzImage ("HdrS" at offset 0x202, Check),
// and the error names where it came from. Uncompressed finds the vmlinux
// beside the bzImage, and PVHEntry reads its PVH entry point (the Xen ELF
// note 18, the x86/HVM direct boot ABI that QEMU's -kernel, Firecracker and
// cloud-hypervisor enter without the bzImage's setup and decompressor).
// x86 has no uncompressed bzImage, so the PVH ELF is the one uncompressed
// form a firmware can enter; host/image/appliance puts it into the kernel
// region (format/kernelpmem).
//
// # Invariants
//
//   - The order and the errors: TestFind, TestCheckKernel (a directory, a
//     non-bzImage, a missing file, each named with its source).
//   - The PVH note is found, and a vmlinux without one refused:
//     TestFindNote, TestPVHEntryRefuses. host/vm's TestKernelEntryAndRate
//     enters the kernel at that point.
//
// # Limits
//
//   - x86-64 only.
//   - A kernel from elsewhere may come without its vmlinux: the image then
//     has no kernel region and boots the bzImage.
package kernel
