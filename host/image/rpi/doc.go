// Package rpi is what a Raspberry Pi (3, 4, 5, Zero 2 W) card needs beyond
// an nvboot image: the Pi's kernel, device trees, firmware and EEPROM
// update files, fetched as Go modules the way gokrazy fetches them, the
// boot partitions' files (config.txt, cmdline.txt, autoboot.txt), and the
// card's partition plan. host/image/appliance builds a Pi image with it
// (Options.Board "rpi": rpidisk.go there makes the filesystems and the
// MBR disk, format/mbr).
//
// # What an image does on a Pi
//
// A Pi has no persistent memory, so there is no text store and no pmem
// state: the image is the elf layout (nvinit and the services plain
// static arm64 executables on an ext4 root, read from the card as any
// Linux program is) and the state is ext4 on the card's data partition,
// mounted on /nv/state (/perm) without DAX. pheap maps its heap MAP_SHARED
// and makes each transaction durable with msync (pheap's "msync" mode), so
// kv's every 204 is still on the card after a power cut, at the card's
// write latency rather than a cache-line flush. The kernel is gokrazy's
// kernel.rpi (the Raspberry Pi Foundation's Linux), which has no erofs:
// the root is ext4, mounted read-only. nvboot deploy sends a service's
// whole program, which nvinit keeps on that state (device/update's
// NewELFPrograms) and tries as on any board; nvboot push publishes the
// card with its programs whole, which a Pi that pulls deploys the same
// way, or installs A/B through tryboot.
//
// # Fetching
//
// KernelPackage, FirmwarePackage and EEPROMPackage are gokrazy's fields,
// with its defaults (github.com/gokrazy/kernel.rpi, firmware,
// rpi-eeprom; "" turns firmware or EEPROM off). Fetch takes each module's
// version from the gokrazy instance (the require in
// builddir/PKG/go.mod beside the config, as gok add writes it; a local
// replace there is used as it is), else from DefaultVersions, and runs go
// mod download -json MODULE@VERSION: the module cache, GOPROXY, checksums
// by go.sum's database, as for any Go dependency.
//
// # The card
//
//	slots 1: 1 boot (FAT32)   2 root (ext4)   3 data (ext4, the state)
//	slots 2: 1 config (FAT32)  2 boot-a  3 boot-b (FAT32)
//	         4 extended: 5 root-a  6 root-b  7 data
//
// MBR over GPT: the Pi 3's and Zero 2 W's boot ROM reads only the MBR,
// looking for bootcode.bin on the first FAT partition, and tryboot's
// boot_partition numbers are MBR partitions (the Pi 4 and 5 read GPT too).
// Roots are named by PARTUUID with one disk identifier for every nvboot
// card (contract.RPiDiskID), so a root found on the SD card is also found
// on USB or NVMe, and an update from an image of another hostname still
// finds its root. The boot partitions are FAT32, at least 128 MiB and
// twice their files (an update rewrites a slot's boot partition whole,
// never resizes it); FAT12 did not boot as a Pi 3's first partition.
//
// A boot partition holds what gokrazy's packer puts in its one boot
// partition, by the same globs: the kernel package's vmlinuz, *.dtb and
// overlays, the firmware package's start*.elf, fixup*.dat (and
// bootcode.bin on the first partition), the EEPROM package's newest
// bootloader as pieeprom.upd and .sig, VL805 firmware as vl805.bin and
// .sig, recovery.bin (on the first partition: the Pi 4 boot ROM looks
// there), then config.txt and cmdline.txt:
//
//	config.txt   arm_64bit=1, kernel=vmlinuz, enable_uart per
//	             SerialConsole, the kernel package's config.txt lines
//	             but those keys, BootloaderExtraLines
//	cmdline.txt  console=tty1 console=serial0,115200 (per SerialConsole;
//	             the last console= is nvinit's), root=PARTUUID=6e76626f-NN
//	             rootfstype=ext4 rootwait ro init=/sbin/nvinit panic=10
//	             oops=panic, nvboot.slot=a|b on a slot, quiet,
//	             KernelCmdline, KernelExtraArgs
//
// With Slots 2 the config partition holds autoboot.txt (format/tryboot:
// every boot starts boot-a, a tryboot boot-b), bootcode.bin, the EEPROM
// files and a config.txt of one comment (a Pi 3 did not boot such a
// partition without one). Each slot's cmdline.txt names its own root and
// nvboot.slot, which is how nvinit knows the slot it runs: the firmware
// passes nothing like UEFI's BootCurrent. docs/UPDATE.md has the test boot.
//
// # Decisions
//
//   - The firmware's tryboot over U-Boot's boot counter, because it needs
//     no second bootloader and the one-shot flag lives in the firmware,
//     not on the card being replaced, as UEFI's BootNext does.
//   - Our own config.txt and cmdline.txt over the kernel package's
//     edited: gokrazy's name gokrazy's init and root; the kernel package's
//     other config.txt lines are kept.
//   - The EEPROM .sig time stamp from the bootloader's release date over
//     the file's modification time (gokrazy's), which the module cache
//     does not keep: the same inputs give the same card.
//
// # Invariants
//
//   - The boot partition holds gokrazy's files, with one slot exactly and
//     with two between the config and a slot's boot partition, plus
//     autoboot.txt: TestBootPartitionMatchesGokrazy.
//   - Each partition's files, cmdline.txt per slot, the newest and signed
//     EEPROM files: TestTreesOneSlot, TestTreesTwoSlots; config.txt and
//     SerialConsole: TestConfigTxt, TestSerialConsole; a kernel package
//     without vmlinuz, a file two packages give, an EEPROM package
//     without a bootloader are refused, named: TestTreesRefuse.
//   - Versions come from the instance, a local replace, or nvboot's
//     defaults, and an unpinned package is refused naming the go.mod to
//     pin it in: TestPinned. The card's partition plan: TestLayout.
//   - The card boots in QEMU's raspi3b and commits a test boot there
//     (host/image/appliance's TestRPiDeployInQEMU, TestRPiTestBootInQEMU);
//     its table passes sfdisk --verify and each filesystem its checker
//     (TestBuildRPi).
//
// # Limits
//
//   - Only the raspi3b board is tested, in QEMU, which runs no GPU
//     firmware: config.txt and the EEPROM files are read by no test, only
//     written and checked by the field's tools; autoboot.txt and the
//     tryboot flag only by the tests' stand-in for the firmware
//     (internal/testutil/raspi). No real Pi has booted a card.
//   - The tryboot flag is documented for every Pi, autoboot.txt's A/B for
//     the Pi 4 and 5; on a Pi 3 and Zero 2 W it rests on bootcode.bin from
//     the first partition reading autoboot.txt, which Raspberry Pi's forum
//     reports working.
//   - The kernel package's modules (lib/modules: Wi-Fi, Bluetooth) are not
//     installed; BootloaderExtraEEPROM is not applied (the release's
//     bootconf.txt stays); RECOVERY.000 (gokrazy's name when the device's
//     EEPROM is current) is never written.
//   - nvinit's network is static (Interfaces): there is no DHCP client.
package rpi
