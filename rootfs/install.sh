#!/usr/bin/env bash
# Installs the nvboot appliance's skeleton into a root tree: the directories,
# files and links of rootfs/skeleton (without the .empty placeholders) and the
# appliance's config (rootfs/appliance/etc: nvinit's config.json, the poold
# config when a service is pooled, hosts, hostname and resolv.conf), each
# replacing what the builder's own skeleton put there. nvboot build installs
# the same skeleton (host/image/appliance/rootfs.go) and writes the configs
# from the image config; Buildroot's post-build script and the Yocto class call
# this.
#
#   rootfs/install.sh TARGET_DIR
set -euo pipefail
[ $# = 1 ] || { echo "usage: $0 TARGET_DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
dst=$1
[ -d "$dst" ] || { echo "rootfs/install.sh: target $dst is not a directory" >&2; exit 1; }
for src in "$here/skeleton" "$here/appliance/etc"; do
	base=$src
	[ "$src" = "$here/appliance/etc" ] && base=$here/appliance
	(cd "$src" && find . -type d) | while read -r d; do
		install -d -m 0755 "$dst/${src#"$base"}/$d"
	done
	(cd "$src" && find . -type f ! -name .empty) | while read -r f; do
		install -m 0644 "$src/$f" "$dst/${src#"$base"}/$f"
	done
	# Links (/perm, gokrazy's writable partition, is the state filesystem).
	(cd "$src" && find . -type l) | while read -r l; do
		ln -sfn "$(readlink "$src/$l")" "$dst/${src#"$base"}/$l"
	done
done
