#!/usr/bin/env bash
# Installs what the build and the tests need on a fresh Debian 12 machine.
# Idempotent and quiet when everything is there already.
# "ci/deps.sh lint-tools" installs only the Go linters ci/lint.sh runs and
# prints the directory that holds them.
set -euo pipefail
cache=${NVBOOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvboot}

# The Go linters, pinned (ci/lint.sh runs them), in a directory keyed by
# the Go version too: staticcheck must be built by a Go at least as new as
# the code it checks.
staticcheck_version=v0.8.2 # staticcheck 2026.2.2
xtools_version=v0.52.0     # golang.org/x/tools, for deadcode
lint_tools() {
	command -v go >/dev/null || { echo "deps: Go is not installed; install Go 1.26 or newer from https://go.dev/dl" >&2; exit 1; }
	local gover dir bin pkg
	gover=$(go env GOVERSION)
	dir=$cache/golint-$gover-staticcheck-$staticcheck_version-xtools-$xtools_version
	for pkg in honnef.co/go/tools/cmd/staticcheck@$staticcheck_version golang.org/x/tools/cmd/deadcode@$xtools_version; do
		bin=${pkg##*/}
		bin=${bin%@*}
		if [ ! -x "$dir/$bin" ]; then
			echo "deps: installing $pkg into $dir" >&2
			# go install writes the binary last: a cut-short install is redone.
			(cd / && GOBIN=$dir GOFLAGS='' go install "$pkg") >&2
		fi
	done
	echo "$dir"
}
if [ "${1:-}" = lint-tools ]; then
	lint_tools
	exit 0
fi
pkgs=(gcc make qemu-system-x86 linux-source-6.1 bc flex bison libelf-dev libssl-dev
	lz4 e2fsprogs erofs-utils ndctl busybox-static libpmemobj-dev hyperfine cpio
	elfutils gdisk dosfstools mtools binutils systemd-boot-efi ovmf
	# the aarch64 loader and arm64 kernel (cross-built), the arm64 tests under
	# qemu-user (off2f, pmem, pheap), arm64 images' UKI objcopy (and the stub,
	# below), the arm64 boards (QEMU's virt; raspi3b for a Raspberry Pi card)
	# and dtc, which reads back the device tree host/vm gives it; fdisk's
	# sfdisk checks a Pi card's MBR
	gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static binutils-aarch64-linux-gnu qemu-system-arm device-tree-compiler fdisk
	# Buildroot's make (support/dependencies/dependencies.sh) and utils/check-package
	g++ file rsync unzip wget bzip2 patch perl python3 python3-magic python3-flake8 shellcheck
	# BitBake and OE-Core's sanity check (the test runs bitbake as the user nvboot-bitbake)
	locales chrpath diffstat gawk xz-utils
	# oelint-adv, installed with pip into a venv (below)
	python3-venv)
# An arm64 image's UKI is made from systemd's arm64 EFI stub, which Debian
# ships in the arm64 build of systemd-boot-efi (Multi-Arch: same): an
# amd64 host adds arm64 to dpkg's architectures to install it.
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
if [ "$(dpkg --print-architecture)" != arm64 ]; then
	pkgs+=(systemd-boot-efi:arm64)
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then
		echo "deps: dpkg --add-architecture arm64 (for systemd-boot-efi:arm64)" >&2
		$SUDO dpkg --add-architecture arm64
	fi
fi
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
# BitBake wants the en_US.UTF-8 locale.
if ! locale -a 2>/dev/null | grep -qix 'en_US.utf-\?8'; then
	echo "deps: generating the en_US.UTF-8 locale (BitBake needs it)" >&2
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO sed -i 's/^# *\(en_US.UTF-8 UTF-8\)/\1/' /etc/locale.gen
	grep -q '^en_US.UTF-8 UTF-8' /etc/locale.gen || echo 'en_US.UTF-8 UTF-8' | $SUDO tee -a /etc/locale.gen >/dev/null
	$SUDO locale-gen >&2
fi
# oelint-adv, pinned: yocto/yocto_test.go checks the layer with exactly this version.
oelint_version=9.11.2
oelint=$cache/oelint-adv-$oelint_version
if [ ! -x "$oelint/bin/oelint-adv" ]; then
	echo "deps: installing oelint-adv $oelint_version into $oelint" >&2
	# In place (a venv cannot be moved); bin/oelint-adv appears last, so a
	# cut-short install is redone.
	rm -rf "$oelint"
	/usr/bin/python3 -m venv "$oelint"
	"$oelint/bin/pip" install -q "oelint-adv==$oelint_version" >&2 || { rm -rf "$oelint"; exit 1; }
fi
# kas, pinned: yocto/yocto_test.go validates yocto/kas/nvboot.yml against its schema.
kas_version=5.5
kas=$cache/kas-$kas_version
if [ ! -x "$kas/bin/kas" ]; then
	echo "deps: installing kas $kas_version into $kas" >&2
	rm -rf "$kas"
	/usr/bin/python3 -m venv "$kas"
	"$kas/bin/pip" install -q "kas==$kas_version" >&2 || { rm -rf "$kas"; exit 1; }
fi
lint_tools >/dev/null
go mod download
