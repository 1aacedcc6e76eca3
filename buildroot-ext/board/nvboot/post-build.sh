#!/usr/bin/env bash
# Buildroot post-build script (BR2_ROOTFS_POST_BUILD_SCRIPT) of the nvboot
# appliance: installs the appliance's skeleton and config (rootfs/ of the
# nvboot checkout, the one nvboot build uses too), then converts the
# programs listed in BR2_PACKAGE_NVBOOT_OFF2F_PROGRAMS to OFF2F in
# TARGET_DIR: the header files stay in place, the texts go to /lib/off2f,
# /etc/nvboot/MANIFEST lists them. post-image.sh builds the store from them.
#
# Called by Buildroot as: post-build.sh TARGET_DIR [BR2_ROOTFS_POST_SCRIPT_ARGS]
set -euo pipefail

TARGET_DIR=$1
NVBOOT_SRC=$(cd "${BR2_EXTERNAL_NVBOOT_PATH:-$(dirname "$0")/../..}/.." && pwd)

programs=$(sed -n 's/^BR2_PACKAGE_NVBOOT_OFF2F_PROGRAMS="\(.*\)"$/\1/p' "${BR2_CONFIG}")
"${NVBOOT_SRC}/rootfs/install.sh" "${TARGET_DIR}"
if [ -n "${programs}" ]; then
	if [ ! -x "${TARGET_DIR}/lib/ld-off2f.so.1" ]; then
		echo "post-build.sh: OFF2F programs need the loader, /lib/ld-off2f.so.1 (BR2_PACKAGE_LD_OFF2F)" >&2
		exit 1
	fi
	# shellcheck disable=SC2086 # the option is a space-separated list
	OFF2F="${HOST_DIR}/bin/off2f" "${NVBOOT_SRC}/rootfs/off2f-programs.sh" "${TARGET_DIR}" ${programs}
fi
