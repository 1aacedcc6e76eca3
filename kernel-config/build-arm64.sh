#!/usr/bin/env bash
# Builds the arm64 appliance kernel, cross-compiled with Debian's
# gcc-aarch64-linux-gnu from linux-source-6.1, tinyconfig, arm64.config and
# common.config; caches Image, System.map and config outside the checkout,
# keyed by the hash of every input (the fragments, this script and
# build-common.sh, the source package's version, the cross compiler's). Run
# through build.sh -arch arm64, which takes the same flags:
#
#   kernel-config/build.sh -arch arm64 [-print-key] [-config-only] [-cached-only]
#
# Prints the cached directory on stdout; progress goes to stderr.
# -cached-only prints it if this input's kernel is built and otherwise exits
# 3, never installing or building anything.
set -euo pipefail
arch=arm64 cross=aarch64-linux-gnu- target=Image image=arch/arm64/boot/Image debs=gcc-aarch64-linux-gnu
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=build-common.sh
. "$here/build-common.sh"
# Image is the uncompressed kernel with arm64's boot header (magic "ARM\x64"
# at 0x38): QEMU's -kernel and a board's loader enter it as it is.
cp "$build/$image" "$out.tmp/Image"
cache_built
