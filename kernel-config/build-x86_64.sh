#!/usr/bin/env bash
# Builds the x86-64 appliance kernel from Debian's linux-source-6.1,
# tinyconfig, x86_64.config and common.config, and caches bzImage, vmlinux,
# System.map and config outside the checkout, keyed by the hash of every
# input (the fragments, this script and build-common.sh, the source package's
# version, the compiler's). Run through build.sh, which takes the same flags:
#
#   kernel-config/build.sh [-arch x86_64] [-print-key] [-config-only] [-cached-only]
#
# Prints the cached directory on stdout; progress goes to stderr.
# -cached-only prints it if this input's kernel is built and otherwise exits
# 3, never installing or building anything.
set -euo pipefail
arch=x86_64 cross="" target=bzImage image=arch/x86/boot/bzImage debs=""
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=build-common.sh
. "$here/build-common.sh"
cp "$build/$image" "$out.tmp/bzImage"
# The same kernel uncompressed, for the kernel region on pmem: a PVH ELF
# (CONFIG_PVH) that a VMM or firmware enters directly. Symbols and the
# comment stripped, as the bzImage's payload is; notes (the PVH entry) kept.
objcopy -R .comment --strip-all "$build/vmlinux" "$out.tmp/vmlinux"
cache_built
