#!/usr/bin/env bash
# Buildroot post-image script (BR2_ROOTFS_POST_IMAGE_SCRIPT) of the nvboot
# appliance: checks that the kernel has every option of nvboot's kernel
# fragments, then has nvboot assemble write, from TARGET_DIR as post-build.sh
# left it, what nvboot build writes: BINARIES_DIR/nvboot/ with disk.img (GPT:
# EFI system partition with a unified kernel image, erofs root, data),
# pmem-text.img (the text store), pmem-state.img and bzImage.
#
# Called by Buildroot as: post-image.sh BINARIES_DIR [KERNEL_PARAMS]
# (KERNEL_PARAMS from BR2_ROOTFS_POST_SCRIPT_ARGS, added to the kernel
# command line: none in QEMU, where the root is /dev/vda2; root=PARTLABEL=root
# on a machine whose disk name is not known in advance).
set -euo pipefail

BINARIES_DIR=$1
KERNEL_PARAMS="${*:2}"
NVBOOT_SRC=$(cd "${BR2_EXTERNAL_NVBOOT_PATH:-$(dirname "$0")/../..}/.." && pwd)

# The kernel's final .config: Buildroot keeps it in the kernel's build
# directory (NVBOOT_KERNEL_CONFIG overrides, for a kernel built elsewhere).
kconfig=${NVBOOT_KERNEL_CONFIG:-}
if [ -z "${kconfig}" ]; then
	for c in "${BUILD_DIR}"/linux-[0-9]*/.config "${BUILD_DIR}"/linux-custom/.config; do
		if [ -f "${c}" ]; then kconfig=${c}; fi
	done
fi
if [ ! -f "${kconfig}" ]; then
	echo "post-image.sh: no kernel .config found under ${BUILD_DIR} (set NVBOOT_KERNEL_CONFIG)" >&2
	exit 1
fi
if ! "${NVBOOT_SRC}/kernel-config/check.sh" "${kconfig}" \
	"${NVBOOT_SRC}/kernel-config/common.config" "${NVBOOT_SRC}/kernel-config/x86_64.config"; then
	echo "post-image.sh: the kernel (${kconfig}) lacks options nvboot's fragments set; see above" >&2
	exit 1
fi

store_mib=$(sed -n 's/^BR2_PACKAGE_NVBOOT_TEXT_STORE_MIB=\([0-9]*\)$/\1/p' "${BR2_CONFIG}")
if ! "${HOST_DIR}/bin/nvboot" assemble -root "${TARGET_DIR}" -kernel "${BINARIES_DIR}/bzImage" \
	-cmdline "${KERNEL_PARAMS}" -text-store-mib "${store_mib:-0}" -o "${BINARIES_DIR}/nvboot"; then
	if [ "${store_mib:-0}" != 0 ]; then
		echo "post-image.sh: BR2_PACKAGE_NVBOOT_TEXT_STORE_MIB=${store_mib}: if the text store is too small, make it larger or 0 (fitted)" >&2
	fi
	exit 1
fi
