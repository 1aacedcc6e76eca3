# shellcheck shell=bash
# shellcheck disable=SC2154 # arch, cross, target, image, debs and here: the sourcing build-<arch>.sh sets them
# Sourced by build-<arch>.sh, which sets arch (x86_64, arm64: the kernel's
# ARCH too), cross (CROSS_COMPILE, "" for a native build), target (the make
# target, the file the cache must hold), image (where the build leaves it,
# under the build directory), debs (packages beyond the source and its build
# deps) and here, and then, once this has built the
# kernel in $build, copies what it caches into $out.tmp and calls
# cache_built. Its text is in every arch's key, as the arch's script is:
# a change here rebuilds every kernel, a change to one arch's script only
# that arch's.
print_key=0
config_only=0
cached_only=0
while [ $# -gt 0 ]; do
	case "$1" in
	-arch) [ "$2" = "$arch" ] || { echo "kernel-config/build-$arch.sh: -arch $2: this script builds $arch" >&2; exit 2; }; shift 2 ;;
	-print-key) print_key=1; shift ;;
	-config-only) config_only=1; shift ;;
	-cached-only) cached_only=1; shift ;;
	*) echo "kernel-config/build.sh: unknown argument $1 (try -h)" >&2; exit 2 ;;
	esac
done

frag_arch="$here/$arch.config"
frag_common="$here/common.config"

tarball=/usr/src/linux-source-6.1.tar.xz
if [ ! -f "$tarball" ] || ! command -v "${cross}gcc" >/dev/null; then
	if [ "$cached_only" = 1 ]; then echo "kernel-config/build.sh: $tarball or ${cross}gcc missing (make kernel installs them and builds the kernel)" >&2; exit 3; fi
	echo "kernel-config/build.sh: $tarball or ${cross}gcc missing; installing linux-source-6.1 ${debs:+$debs }and build deps" >&2
	# Another first build may be installing too: wait for dpkg's lock.
	apt-get -o DPkg::Lock::Timeout=600 update -q >&2
	# shellcheck disable=SC2086 # debs is a list
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q linux-source-6.1 $debs bc flex bison libelf-dev libssl-dev >&2
fi
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1)
ccver=$("${cross}gcc" --version | head -1)
# The key covers what the build does, not how it is explained: comments and
# blank lines are left out (a fragment's "# CONFIG_X is not set" is kept: it
# is an input), so rewording a comment does not cost a ten-minute rebuild.
significant() { sed -E '/^# CONFIG_[A-Za-z0-9_]+ is not set$/b; /^[[:space:]]*#/d; /^[[:space:]]*$/d' "$@"; }
key=$( { significant "$frag_arch" "$frag_common" "$here/build-$arch.sh" "$here/build-common.sh"; echo "$srcver"; echo "$ccver"; echo "$arch"; } | sha256sum | cut -c1-16)
if [ "$print_key" = 1 ]; then echo "$key"; exit 0; fi

cache=${NVBOOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvboot}
out="$cache/kernel/$arch-$key"
cached() { [ -f "$out/$target" ] && [ -f "$out/config" ]; }
if cached; then
	echo "kernel: cached $out" >&2
	echo "$out"; exit 0
fi
if [ "$cached_only" = 1 ]; then echo "kernel-config/build.sh: no $arch kernel built at $out (make kernel builds it, ten to fifteen minutes)" >&2; exit 3; fi

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
# One build per key at a time: a second one (another make test, a measure
# without NVBOOT_KERNEL) in the same tree would corrupt both. It waits, then
# finds the kernel cached.
exec 9>"$build.lock"
if ! flock -n 9; then
	echo "kernel: another build of $arch-$key is running; waiting for it" >&2
	flock 9
fi
if cached; then
	echo "kernel: cached $out (built meanwhile)" >&2
	echo "$out"; exit 0
fi
kmake() { make -C "$src" O="$build" ARCH="$arch" CROSS_COMPILE="$cross" "$@"; }
echo "kernel: configuring (tinyconfig + $arch.config + common.config)" >&2
kmake -s tinyconfig >"$build/merge.log" 2>&1
# merge_config.sh runs make itself: ARCH and CROSS_COMPILE from the environment.
ARCH="$arch" CROSS_COMPILE="$cross" "$src/scripts/kconfig/merge_config.sh" -m -O "$build" "$build/.config" "$frag_arch" "$frag_common" >"$build/merge.log" 2>&1
kmake -s olddefconfig >&2
"$here/check.sh" "$build/.config" "$frag_arch" "$frag_common"
if [ "$config_only" = 1 ]; then echo "$build"; exit 0; fi

echo "kernel: building $arch $target with $(nproc) jobs (ten to fifteen minutes the first time)" >&2
start=$(date +%s)
kmake -j"$(nproc)" "$target" 2>&1 |
	awk '/^  (CC|AR|LD)/ { n++; if (n % 200 == 0) { printf "kernel: %d objects built\n", n > "/dev/stderr" } } /error:|\*\*\*/ { print > "/dev/stderr" }'
[ -f "$build/$image" ] || { echo "kernel: build failed (see $build)" >&2; exit 1; }
rm -rf "$out.tmp" && mkdir -p "$out.tmp"

# cache_built finishes what the arch's script copied into $out.tmp: the
# map (the kernel has no kallsyms: nvboot measure -profile names its
# initcalls from it) and the config, moved into the cache in one rename.
cache_built() {
	cp "$build/System.map" "$out.tmp/System.map"
	cp "$build/.config" "$out.tmp/config"
	rm -rf "$out" && mv "$out.tmp" "$out"
	echo "kernel: built in $(( $(date +%s) - start ))s, cached at $out" >&2
	echo "$out"
}
