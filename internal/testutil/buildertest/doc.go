// Package buildertest is what the Buildroot and Yocto tests share: the
// nvboot checkout, the appliance's real programs built as nvboot build
// builds them, the host tools the builders' hooks run, a target directory
// like the one Buildroot's TARGET_DIR or Yocto's IMAGE_ROOTFS would be, and
// running as an unprivileged user (BitBake refuses root).
//
// Reference builds the image nvboot build makes from the same programs and
// the given kernel (a bzImage alone: the other builders' kernel packages
// give no PVH vmlinux, so their images have no kernel region), and
// SameFiles compares the builders' outputs with it byte for byte.
// buildroot-ext/README.md and yocto/README.md describe the builders and
// their tests.
package buildertest
