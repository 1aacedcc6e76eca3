#!/usr/bin/env bash
# Converts programs of a root tree to OFF2F in place, as nvboot build places
# them: the header file stays at the program's path, its text goes into the
# tree's /lib/off2f (the fallback copy, from which nvboot assemble fills the
# text store), and /etc/nvboot/MANIFEST lists the texts. The first program
# is PID 1: its loader mounts the text store from /dev/pmem0 itself, and
# checks its whole text against the CRC-32C in its note (-crc).
#
#   rootfs/off2f-programs.sh TARGET_DIR /sbin/nvinit /bin/kv ...
#
# Needs off2f on PATH (or $OFF2F). A program that is missing, or is not a
# static executable, stops the script with its path named.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 TARGET_DIR PROGRAM..." >&2; exit 2; }
off2f=${OFF2F:-off2f}
root=$1; shift
store=/nv/text fallback=/lib/off2f
mkdir -p "$root$fallback" "$root/etc/nvboot"
manifest=()
first=1
errs=$(mktemp)
trap 'rm -f "$errs"' EXIT
for prog in "$@"; do
	case "$prog" in
	/*) ;;
	*) echo "off2f-programs: $prog: give the program's absolute path in the target" >&2; exit 1 ;;
	esac
	path=$root$prog
	if [ ! -f "$path" ]; then
		echo "off2f-programs: $prog: marked for OFF2F but not in the target ($path)" >&2
		exit 1
	fi
	args=(-store "$root$fallback" -store-path "$store" -fallback "$root$fallback" -fallback-path "$fallback")
	[ "$first" = 1 ] && args+=(-mount /dev/pmem0:ext4:dax=always -crc)
	if ! json=$("$off2f" convert -json "${args[@]}" -o "$path" "$path" 2>"$errs"); then
		echo "off2f-programs: $prog: cannot be converted to OFF2F (it must be a static executable):" >&2
		sed 's/^/  /' "$errs" >&2
		exit 1
	fi
	hash=$(printf '%s\n' "$json" | sed -n 's/^  "text": "\([0-9a-f]\{64\}\)",$/\1/p')
	[ -n "$hash" ] || { echo "off2f-programs: $prog: off2f printed no text hash" >&2; exit 1; }
	manifest+=("$hash")
	first=0
done
printf '%s\n' "${manifest[@]}" | LC_ALL=C sort -u > "$root/etc/nvboot/MANIFEST.tmp"
chmod 0644 "$root/etc/nvboot/MANIFEST.tmp"
mv "$root/etc/nvboot/MANIFEST.tmp" "$root/etc/nvboot/MANIFEST"
