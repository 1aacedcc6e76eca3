#!/usr/bin/env bash
# Builds the x86-64 appliance kernel from Debian's linux-source-6.1 and the
# fragments x86_64.config and common.config, and caches the result outside the
# checkout, keyed by the hash of every input (fragments, this script, the source
# package version, the compiler). Prints the path of the cached directory
# (bzImage, vmlinux, System.map, .config) on stdout; progress goes to stderr.
# Run through build.sh, which takes the same flags:
#   kernel-config/build.sh [-arch x86_64] [-print-key] [-config-only] [-cached-only]
# -cached-only prints the cached directory if this input's kernel is built and
# otherwise exits 3, never installing or building anything.
# NVBOOT_CACHE overrides the cache root (default ${XDG_CACHE_HOME:-~/.cache}/nvboot).
set -euo pipefail

arch=x86_64
print_key=0
config_only=0
cached_only=0
while [ $# -gt 0 ]; do
	case "$1" in
	-arch) arch="$2"; shift 2 ;;
	-print-key) print_key=1; shift ;;
	-config-only) config_only=1; shift ;;
	-cached-only) cached_only=1; shift ;;
	-h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "kernel-config/build.sh: unknown argument $1 (try -h)" >&2; exit 2 ;;
	esac
done

here=$(cd "$(dirname "$0")" && pwd)
frag_arch="$here/$arch.config"
frag_common="$here/common.config"
[ -f "$frag_arch" ] || { echo "kernel-config/build.sh: no fragment for arch $arch ($frag_arch)" >&2; exit 2; }

tarball=/usr/src/linux-source-6.1.tar.xz
if [ ! -f "$tarball" ]; then
	if [ "$cached_only" = 1 ]; then echo "kernel-config/build.sh: $tarball missing (make kernel installs it and builds the kernel)" >&2; exit 3; fi
	echo "kernel-config/build.sh: $tarball missing; installing linux-source-6.1 and build deps" >&2
	# Another first build may be installing too: wait for dpkg's lock.
	apt-get -o DPkg::Lock::Timeout=600 update -q >&2
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q linux-source-6.1 bc flex bison libelf-dev libssl-dev >&2
fi
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1)
ccver=$(gcc --version | head -1)
# The key covers what the build does, not how it is explained: comments and
# blank lines are left out (a fragment's "# CONFIG_X is not set" is kept: it
# is an input), so rewording a comment does not cost a ten-minute rebuild.
significant() { sed -E '/^# CONFIG_[A-Za-z0-9_]+ is not set$/b; /^[[:space:]]*#/d; /^[[:space:]]*$/d' "$@"; }
key=$( { significant "$frag_arch" "$frag_common" "$0"; echo "$srcver"; echo "$ccver"; echo "$arch"; } | sha256sum | cut -c1-16)
if [ "$print_key" = 1 ]; then echo "$key"; exit 0; fi

cache=${NVBOOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvboot}
out="$cache/kernel/$arch-$key"
if [ -f "$out/bzImage" ] && [ -f "$out/config" ]; then
	echo "kernel: cached $out" >&2
	echo "$out"; exit 0
fi
if [ "$cached_only" = 1 ]; then echo "kernel-config/build.sh: no kernel built at $out (make kernel builds it, about ten minutes)" >&2; exit 3; fi

src="$cache/src/linux-source-6.1-$srcver"
# Every key shares the unpacked source: one unpack at a time.
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
# One build per key at a time: a second one (another make test, a measure
# without NVBOOT_KERNEL) in the same tree would corrupt both. It waits, then
# finds the kernel cached.
exec 9>"$build.lock"
if ! flock -n 9; then
	echo "kernel: another build of $key is running; waiting for it" >&2
	flock 9
fi
if [ -f "$out/bzImage" ] && [ -f "$out/config" ]; then
	echo "kernel: cached $out (built meanwhile)" >&2
	echo "$out"; exit 0
fi
karch=$arch; [ "$arch" = x86_64 ] && karch=x86_64
echo "kernel: configuring (tinyconfig + $arch.config + common.config)" >&2
make -s -C "$src" O="$build" ARCH="$karch" tinyconfig >"$build/merge.log" 2>&1
"$src/scripts/kconfig/merge_config.sh" -m -O "$build" "$build/.config" "$frag_arch" "$frag_common" >"$build/merge.log" 2>&1
make -s -C "$src" O="$build" ARCH="$karch" olddefconfig >&2
"$here/check.sh" "$build/.config" "$frag_arch" "$frag_common"
if [ "$config_only" = 1 ]; then echo "$build"; exit 0; fi

echo "kernel: building bzImage with $(nproc) jobs (about 5 minutes the first time)" >&2
start=$(date +%s)
make -C "$src" O="$build" ARCH="$karch" -j"$(nproc)" bzImage 2>&1 |
	awk '/^  (CC|AR|LD)/ { n++; if (n % 200 == 0) { printf "kernel: %d objects built\n", n > "/dev/stderr" } } /error|Error/ { print > "/dev/stderr" }'
[ -f "$build/arch/x86/boot/bzImage" ] || { echo "kernel: build failed (see $build)" >&2; exit 1; }
mkdir -p "$out.tmp"
cp "$build/arch/x86/boot/bzImage" "$out.tmp/bzImage"
# The same kernel uncompressed, for the kernel region on pmem: a PVH ELF
# (CONFIG_PVH) that a VMM or firmware enters directly. Symbols and the
# comment stripped, as the bzImage's payload is; notes (the PVH entry) kept.
objcopy -R .comment --strip-all "$build/vmlinux" "$out.tmp/vmlinux"
# The kernel has no kallsyms: nvboot measure -profile names its initcalls
# from this map.
cp "$build/System.map" "$out.tmp/System.map"
cp "$build/.config" "$out.tmp/config"
rm -rf "$out" && mv "$out.tmp" "$out"
echo "kernel: built in $(( $(date +%s) - start ))s, cached at $out" >&2
echo "$out"
