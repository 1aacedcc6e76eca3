#!/usr/bin/env bash
# Installs what the build and the tests need on a fresh Debian 12 machine.
# Idempotent and quiet when everything is there already.
set -euo pipefail
pkgs=(gcc make qemu-system-x86 linux-source-6.1 bc flex bison libelf-dev libssl-dev
	lz4 e2fsprogs erofs-utils ndctl busybox-static libpmemobj-dev hyperfine cpio
	elfutils gdisk dosfstools mtools binutils systemd-boot-efi ovmf)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}" >&2
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -q >&2
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}" >&2
fi
command -v go >/dev/null || { echo "deps: Go is not installed; install Go 1.26 or newer from https://go.dev/dl" >&2; exit 1; }
go mod download
