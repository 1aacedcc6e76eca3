#!/usr/bin/env bash
# Builds the appliance kernel for an arch and caches it outside the checkout,
# keyed by the hash of every input. Prints the path of the cached directory on
# stdout; progress goes to stderr.
#
#   kernel-config/build.sh [-arch x86_64|arm64] [-print-key] [-config-only] [-cached-only]
#
# x86_64 (the default) caches bzImage, vmlinux, System.map and config; arm64
# caches Image, System.map and config. -cached-only prints the cached
# directory if this input's kernel is built and otherwise exits 3, never
# installing or building anything. NVBOOT_CACHE overrides the cache root
# (default ${XDG_CACHE_HOME:-~/.cache}/nvboot).
#
# This script only picks the arch's own script, build-<arch>.sh, which does
# the work and whose text is in that arch's cache key: this one is in no key,
# so it must do nothing but choose.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
arch=x86_64
prev=
for a in "$@"; do
	case "$a" in -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
	[ "$prev" = -arch ] && arch=$a
	prev=$a
done
case "$arch" in
x86_64|arm64) exec "$here/build-$arch.sh" "$@" ;;
*) echo "kernel-config/build.sh: no kernel for arch \"$arch\" (x86_64 or arm64)" >&2; exit 2 ;;
esac
