// Package vmtest is what tests that boot QEMU share: finding the kernel
// (Kernel, KernelArm64) and building a static program for a guest
// (StaticProgram; StaticProgramFor cross-builds one for an arm64 guest).
//
// Kernel returns host/kernel's Find without a checkout, so a test never
// builds a kernel and a plain go test boots nothing unless asked to: it
// skips under -short, when $NVBOOT_KERNEL is unset (make test sets it) or a
// tool it needs is missing, and fails when $NVBOOT_KERNEL names no
// bzImage. KernelArm64 does the same with $NVBOOT_KERNEL_ARM64 and an
// arm64 Image.
package vmtest
