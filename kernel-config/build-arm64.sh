#!/usr/bin/env bash
# Builds the arm64 appliance kernel, cross-compiled with Debian's
# gcc-aarch64-linux-gnu from linux-source-6.1, tinyconfig, arm64.config and
# common.config; caches Image, System.map and config outside the checkout,
# keyed by the hash of every input (the fragments, this script, the source
# package's version, the cross compiler's). Run through build.sh -arch arm64,
# which takes the same flags:
#
#   kernel-config/build.sh -arch arm64 [-print-key] [-config-only] [-cached-only]
#
# Prints the cached directory on stdout; progress goes to stderr.
# -cached-only prints it if this input's kernel is built and otherwise exits
# 3, never installing or building anything.
set -euo pipefail

arch=arm64
print_key=0
config_only=0
cached_only=0
while [ $# -gt 0 ]; do
	case "$1" in
	-arch) [ "$2" = arm64 ] || { echo "kernel-config/build-arm64.sh: -arch $2: this script builds arm64" >&2; exit 2; }; shift 2 ;;
	-print-key) print_key=1; shift ;;
	-config-only) config_only=1; shift ;;
	-cached-only) cached_only=1; shift ;;
	*) echo "kernel-config/build.sh: unknown argument $1 (try -h)" >&2; exit 2 ;;
	esac
done

here=$(cd "$(dirname "$0")" && pwd)
frag_arch="$here/arm64.config"
frag_common="$here/common.config"
cross=aarch64-linux-gnu-

tarball=/usr/src/linux-source-6.1.tar.xz
if [ ! -f "$tarball" ] || ! command -v "${cross}gcc" >/dev/null; then
	if [ "$cached_only" = 1 ]; then echo "kernel-config/build.sh: $tarball or ${cross}gcc missing (make kernel installs them and builds the kernel)" >&2; exit 3; fi
	echo "kernel-config/build.sh: $tarball or ${cross}gcc missing; installing linux-source-6.1, gcc-aarch64-linux-gnu and build deps" >&2
	# Another first build may be installing too: wait for dpkg's lock.
	apt-get -o DPkg::Lock::Timeout=600 update -q >&2
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q linux-source-6.1 gcc-aarch64-linux-gnu bc flex bison libelf-dev libssl-dev >&2
fi
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1)
ccver=$("${cross}gcc" --version | head -1)
# The key covers what the build does, not how it is explained: comments and
# blank lines are left out (a fragment's "# CONFIG_X is not set" is kept).
significant() { sed -E '/^# CONFIG_[A-Za-z0-9_]+ is not set$/b; /^[[:space:]]*#/d; /^[[:space:]]*$/d' "$@"; }
key=$( { significant "$frag_arch" "$frag_common" "$0"; echo "$srcver"; echo "$ccver"; echo "$arch"; } | sha256sum | cut -c1-16)
if [ "$print_key" = 1 ]; then echo "$key"; exit 0; fi

cache=${NVBOOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvboot}
out="$cache/kernel/$arch-$key"
cached() { [ -f "$out/Image" ] && [ -f "$out/config" ]; }
if cached; then
	echo "kernel: cached $out" >&2
	echo "$out"; exit 0
fi
if [ "$cached_only" = 1 ]; then echo "kernel-config/build.sh: no arm64 kernel built at $out (make kernel builds it, about fifteen minutes)" >&2; exit 3; fi

src="$cache/src/linux-source-6.1-$srcver"
# Every key and arch shares the unpacked source (built out of tree with O=):
# one unpack at a time.
mkdir -p "$cache/src"
exec 8>"$src.lock"
flock 8
if [ ! -f "$src/Makefile" ]; then
	echo "kernel: unpacking $tarball" >&2
	rm -rf "$src.tmp" && mkdir -p "$src.tmp"
	tar -xf "$tarball" -C "$src.tmp" --strip-components=1
	mv "$src.tmp" "$src"
fi
exec 8>&-

build="$cache/kernel/build-$arch-$key"
mkdir -p "$build"
# One build per key at a time; a second waits, then finds the kernel cached.
exec 9>"$build.lock"
if ! flock -n 9; then
	echo "kernel: another build of $arch-$key is running; waiting for it" >&2
	flock 9
fi
if cached; then
	echo "kernel: cached $out (built meanwhile)" >&2
	echo "$out"; exit 0
fi
kmake() { make -C "$src" O="$build" ARCH=arm64 CROSS_COMPILE="$cross" "$@"; }
echo "kernel: configuring (tinyconfig + arm64.config + common.config)" >&2
kmake -s tinyconfig >"$build/merge.log" 2>&1
# merge_config.sh runs make itself: ARCH and CROSS_COMPILE from the environment.
ARCH=arm64 CROSS_COMPILE="$cross" "$src/scripts/kconfig/merge_config.sh" -m -O "$build" "$build/.config" "$frag_arch" "$frag_common" >"$build/merge.log" 2>&1
kmake -s olddefconfig >&2
"$here/check.sh" "$build/.config" "$frag_arch" "$frag_common"
if [ "$config_only" = 1 ]; then echo "$build"; exit 0; fi

echo "kernel: building arm64 Image with $(nproc) jobs (about 15 minutes the first time)" >&2
start=$(date +%s)
kmake -j"$(nproc)" Image 2>&1 |
	awk '/^  (CC|AR|LD)/ { n++; if (n % 200 == 0) { printf "kernel: %d objects built\n", n > "/dev/stderr" } } /error:|\*\*\*/ { print > "/dev/stderr" }'
[ -f "$build/arch/arm64/boot/Image" ] || { echo "kernel: build failed (see $build)" >&2; exit 1; }
mkdir -p "$out.tmp"
# Image is the uncompressed kernel with arm64's boot header (magic "ARM\x64"
# at 0x38): QEMU's -kernel and a board's loader enter it as it is.
cp "$build/arch/arm64/boot/Image" "$out.tmp/Image"
# The kernel has no kallsyms: nvboot measure -profile names its initcalls
# from this map.
cp "$build/System.map" "$out.tmp/System.map"
cp "$build/.config" "$out.tmp/config"
rm -rf "$out" && mv "$out.tmp" "$out"
echo "kernel: built in $(( $(date +%s) - start ))s, cached at $out" >&2
echo "$out"
