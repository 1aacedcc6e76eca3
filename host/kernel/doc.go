// Package kernel finds the appliance kernel (an x86 bzImage, or an arm64
// Image) for the commands, the tests and the benchmarks, and the
// uncompressed PVH vmlinux built with the bzImage. kernel-config/README.md
// describes the kernel itself.
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
// Lookup.Arch chooses the architecture: x86_64 (the default) or arm64,
// whose kernel comes from $NVBOOT_KERNEL_ARM64 and build.sh -arch arm64.
// Whatever is found must be a kernel of that arch (CheckArch): an x86
// bzImage ("HdrS" at offset 0x202) or an arm64 Image (the magic "ARM\x64"
// at 0x38); a kernel of the other arch is refused as such, and the error
// names where it came from. Uncompressed finds the vmlinux
// beside the bzImage, and PVHEntry reads its PVH entry point (the Xen ELF
// note 18, the x86/HVM direct boot ABI that QEMU's -kernel, Firecracker and
// cloud-hypervisor enter without the bzImage's setup and decompressor).
// x86 has no uncompressed bzImage, so the PVH ELF is the one uncompressed
// form a firmware can enter; host/image/appliance puts it into the kernel
// region (format/kernelpmem). An arm64 Image is already the uncompressed
// kernel, entered at its first byte: it has no vmlinux beside it,
// Uncompressed and PVHEntry are x86's, and an arm64 image's region holds
// the Image itself.
//
// # Invariants
//
//   - The order and the errors: TestFind, TestCheckKernel (a directory, a
//     non-bzImage, a missing file, each named with its source); the arm64
//     kernel's variable, build.sh -arch arm64, and a kernel of the wrong
//     arch named: TestFindArm64, TestCheckArch.
//   - The PVH note is found, and a vmlinux without one refused:
//     TestFindNote, TestPVHEntryRefuses. host/vm's TestKernelEntryAndRate
//     enters the kernel at that point.
//
// # Limits
//
//   - x86-64 and arm64 only; the PVH vmlinux is x86's.
//   - A kernel from elsewhere may come without its vmlinux: the image then
//     has no kernel region and boots the bzImage.
package kernel
