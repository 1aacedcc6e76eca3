// Package appliance assembles an nvboot appliance image from an image config
// (host/image/config): it builds the services and nvinit as static Go
// programs, lays them out as the chosen layout asks, and writes the files a
// device or QEMU boots. It also says how to boot an image in QEMU
// (VMConfig), playing the board's firmware, and writes images from a root
// tree another build system filled (Assemble).
//
// # Layouts
//
//	layout     nvinit                  services             text store (pmem0)
//	off2f      OFF2F, its note names   OFF2F                their texts, MANIFEST
//	           the store device
//	elf        ELF on the root         ELF on the root      empty
//	initramfs  ELF in an initramfs     ELF in it            empty
//	dax-elf    ELF on the root         whole ELFs in        the executables,
//	                                   /nv/text/bin         MANIFEST
//
// off2f is the product; the others are what nvboot measure compares it with.
// off2f's programs (nvinit, the services, a deploy's BuildService) are
// linked with -R=0x200000 (gobuild.go's off2fLink): every segment on a 2 MiB
// boundary, so the converter gives each read-only segment whole 2 MiB pages
// (off2f.FlagHugeSpan) and DAX maps all of the text with 2 MiB entries
// (docs/OFF2F.md: nvinit reaches main 2.6 ms sooner on the device clock).
// The other layouts link as Go does by default.
//
// # Raspberry Pi
//
// For target arm64-rpi (Options.Board "rpi", rpidisk.go) the build makes a
// Pi card instead: arm64 programs in the elf layout (a Pi has no pmem;
// off2f, dax-elf and initramfs are refused, as are RootFS erofs, KernelPath
// and a userland), an ext4 root, the state filesystem on the card's data
// partition (nvinit mounts it without DAX), the boot partitions
// host/image/rpi fills from KernelPackage, FirmwarePackage and
// EEPROMPackage (fetched before anything is compiled), and an MBR disk
// (format/mbr, the Pi 3's boot ROM reads no GPT; contract.RPiPartitions,
// with Slots 2 the tryboot A/B). Outputs: disk.img, image.json (Target
// arm64-rpi, Arch arm64, no Kernel, no Pmem), the stamp. VMConfig refuses a
// Pi image (Bootable): QEMU's raspi3b runs no Pi firmware; the tests play
// it (internal/testutil/raspi).
//
// # Build
//
// BuildImage runs in phases with a file each: prepare.go (staging trees,
// the skeleton from rootfs/skeleton, the device configs from
// host/image/derive, checked before anything is compiled), programs.go (go
// build, ld-off2f), place.go (programs, manifests and configs on the root
// tree), store.go (the text store), state.go (the state and its template),
// disk.go (root filesystem or initramfs, ESP, GPT disk), uki.go, gobuild.go,
// fsimage.go, tools.go; target.go has what differs by target.
//
// # Targets
//
// An image is one target's (config.Target, chosen by
// config.Config.ChooseTarget; Options.Target): amd64-pc, arm64-virt, or
// arm64-rpi, a Raspberry Pi card (Options.Board rpi: see Raspberry Pi
// above). Every program is cross-built for the target's GOARCH (set last in
// go build's environment, over a config GOARCH that -arch overrode; no
// GOAMD64 of nvboot's), ld-off2f with the loader Makefile's ARCH (the cross
// gcc for another machine than the host's) and checked to be that
// machine's ELF, and off2f.Options.Arch refuses a program of another
// machine: an image never mixes machines. image.json records Arch and
// Target (ArchOrDefault, TargetOrDefault: amd64-pc for an older one).
// What the board reads differs (target.go): an arm64 disk has the arm64
// root partition type, EFI/BOOT/BOOTAA64.EFI made from systemd's linuxaa64
// stub by aarch64-linux-gnu-objcopy, console=ttyAMA0 (the virt board's
// PL011) and only the arch-independent boot trims (BootTrimsArm64); the
// kernel is an arm64 Image, which its kernel region holds as it is (x86's
// holds the PVH vmlinux). The kernel region, the UKI and the
// partition types of an amd64 image are as they were: the same bytes.
// amd64-pc images boot on QEMU's pc board, arm64-virt ones on its virt
// board (Bootable; VMConfig, nvboot run, measure and powercut refuse a Pi
// image, naming it).
//
// Outputs: disk.img, a GPT disk (protective MBR, both tables, GUIDs derived
// from a seed) with an EFI system partition holding only
// EFI/BOOT/BOOTX64.EFI, the root filesystem (erofs, uncompressed, or ext4
// with RootFS; absent in the initramfs layout) and a 16 MiB ext4 data
// partition nothing mounts yet; pmem-text.img and pmem-state.img (fsdax
// images, format/fsdax); pmem-kernel.img (the kernel region,
// format/kernelpmem) with vmlinux; bzImage (an arm64 image: Image);
// initrd.cpio (initramfs layout);
// image.json (what was built and how to boot it); the stamp .nvboot-image.
// With Slots: 2 the disk holds two roots and two XBOOTLDR boot partitions,
// one UKI each (slots.go; docs/UPDATE.md), and no kernel region.
//
// For nvboot push (host/publish) a build also gives Options.OnProgram each
// OFF2F program as converted (header file, text, its path on the root;
// with the elf layout, a Pi's, each program whole),
// puts Options.ImageKey, the public key pulled images are checked with,
// at contract.ImageKeyPath and the config's Version at
// contract.VersionPath, and records in image.json BaseSHA256 (base.go):
// the hash of a listing of the root tree without the services' programs,
// the texts' fallback copies, the MANIFESTs, the store image, the image id
// and the version, then of the kernel and the command line's parts the
// config gives, so that two images with the same base differ only in what
// a deploy changes; the base is on the root too (contract.BasePath), for a
// pulling appliance to compare (TestBase, TestBaseCoversTheKernel).
// With Update.Registry the build also places nvpull (pull.go: cmd/nvpull,
// an OFF2F program of role contract.RoleSystem at contract.PullProgram,
// which the base covers), the registry's credentials (0600) and CA
// certificate, and refuses to build without the image key.
//
// The text store is ext4 with 4 KiB blocks and 2 MiB clusters (mke2fs -O
// bigalloc -C 2097152 -d), so every file starts on a 2 MiB boundary of the
// device and text laid out 2 MiB-congruent lands 2 MiB-aligned on pmem. Its
// size is the 2 MiB clusters its files take plus 16 MiB, a quarter more,
// rounded to 2 MiB (or TextStoreMiB; storeSize says why clusters). A pmem image is its filesystem plus 2
// MiB, rounded up to 128 MiB (room for deploys; see pmemSize). The
// root also carries the store image and a gzip state template, from which
// nvinit provisions blank or stale pmem (docs/OFF2F.md). Every OFF2F
// program's clean copy is in the root's /lib/off2f; nvinit's note also
// names the store's device and records its text's CRC-32C, which its
// loader checks at every boot (place.go's convert).
//
// # Output directory
//
// A build writes into .NAME.build-PID-N beside the output, holds an flock
// on it, and renames it into place at the end; the next build of NAME
// removes what a killed build left. An existing directory is replaced only
// when it holds nothing but files a build writes (outdir.OutputFiles),
// carries the stamp, and any image.json there is nvboot's: a user's project
// directory with their own image.json config is refused and left as it is.
// A mount point is refused before the build (its st_dev differs from its
// parent's, or /proc/self/mountinfo lists it: a bind mount): the final
// rename of it would fail with EBUSY after the whole build.
// An image directory has one user at a time (LockImage: the same flock,
// held by a VM booted from it or a build replacing it; the holder is named
// from /proc/locks). A rebuild keeps pmem-state.img when a device has
// written it (its hash differs from image.json's StateSHA256) and the new
// state has the same size and format, and refuses otherwise
// (ErrStateNotKept) unless DiscardState; an unchanged text store keeps the
// file the device left.
//
// # Reproducible
//
// The same inputs give the same bytes: go build -trimpath -buildvcs=false
// -ldflags='-s -w -buildid=' (and -R=0x200000 in off2f) with CGO_ENABLED=0; file times pinned to the
// epoch before each filesystem is made; mke2fs with E2FSPROGS_FAKE_TIME and
// a uuid and hash seed derived from the layout and hostname, debugfs
// setting the inode times mke2fs copied; mkfs.erofs -T0 --all-root;
// mkfs.vfat --invariant with a derived volume id; the pmem info block's
// uuid from the filesystem's SHA-256; the initramfs sorted with mtime 0;
// the UKI's PE time stamp (objcopy ignores SOURCE_DATE_EPOCH) set to 0 and
// its checksum recomputed. The floor of the device's clock is nvboot's
// (contract.ClockEpoch), never the build's time.
//
// The host tools a build runs are listed once, each with its Debian package
// (config.Config.Tools); CheckTools adds the layout's own before anything is
// compiled, and a missing tool is named with its apt-get install line.
//
// # Kernel command line
//
// root=/dev/vda2 rootfstype=erofs ro init=/sbin/nvinit quiet (rdinit=
// in the initramfs layout), then BootTrims unless NoBootTrims, then
// KernelCmdline and a gokrazy config's KernelExtraArgs. The UKI adds
// console=ttyS0,115200 first, the VM runner console=ttyS0; a console= in
// KernelCmdline comes later and wins. Measured with initcall_debug under TCG
// (docs/BENCHMARKS.md), BootTrims take power-on to service from about 2.9 s
// to about 1.8 s: acpi=noirq (ACPI PCI link objects cost about 230 ms per
// virtio device), i8042.noaux i8042.nokbd (the PS/2 probe, about 600 ms
// before the root mount), no_timer_check (11 ms of busy waiting on the
// device clock); on the device clock (nvboot measure -profile),
// rcupdate.rcu_expedited=1 (nvinit's cgroup setup waits out two RCU grace
// periods: the first answer 14 ms sooner), noreplace-smp (1.7 ms of
// rewriting lock prefixes on a one-core board) and small dentry and inode
// hash tables (0.5 ms); BootTrims says why each. NoBootTrims keeps them
// for boards whose PCI interrupts need ACPI routing.
// kernel-config/README.md has the kernel's own trims.
//
// # Boot path
//
// UEFI firmware boots the disk's removable-media path EFI/BOOT/BOOTX64.EFI
// (arm64: BOOTAA64.EFI) with no arguments. That file is a unified kernel
// image: systemd's EFI stub (Debian's systemd-boot-efi) with sections
// added by objcopy: .osrel (NAME=nvboot, the hostname), .cmdline, .initrd
// (initramfs layout), .linux (the bzImage or Image), each on a page after
// the stub's last one.
//
//   - A UKI over the bare EFI-stub kernel: the kernel's stub takes its
//     command line only from the firmware's load options, and firmware
//     booting removable media passes none; booted through OVMF the bare
//     kernel got an empty command line and panicked before the console.
//   - Over CONFIG_CMDLINE: one built-in command line per kernel, where the
//     cached kernel serves every image, layout and KernelCmdline.
//   - Over a boot entry: an efibootmgr entry lives in the board's NVRAM,
//     which nvboot flash cannot write and a card moved to another board
//     does not carry.
//   - systemd's stub over one of our own: it is the field's UKI loader,
//     packaged in Debian and what distributions sign for Secure Boot
//     (ukify itself is not in Debian 12).
//
// In QEMU (VMConfig) the kernel is booted directly with the image's command
// line, which is what the UKI hands over; the disk is vda, the text store
// pmem0, the state pmem1, the kernel region pmem2. The pmem is given as
// e820 regions by default (DefaultPmemAs): emulated NVDIMMs cost the kernel
// about 40 ms of a 1-GIPS boot in QEMU's ACPI methods. Such a board needs
// no ACPI, so VMConfig asks the VM runner for none and adds
// nvboot.off=reset; so does a board with its pmem as virtio-pmem devices
// (PmemAs vm.PmemVirtio: asynchronous pmem, pheap and omf flushing with
// msync there; the kernel region is the third device, booted as from an
// e820 region; the boot waits for the host's fsyncs, so it is not
// Deterministic). On the device clock the storage model is also applied
// inside the guest (GuestDiskLimit, docs/DEVICE-CLOCK.md). With BootDisk the
// firmware boots disk.img through OVMF, as a board would.
//
// BootOptions.Board vm.BoardMicrovm boots an amd64-pc image on QEMU's
// microvm instead (x86Board): the kernel directly, the pmem as e820
// regions only (it maps no NVDIMM or virtio-pmem device; either is
// refused, naming the image), with ACPI, which its pmem needs and through
// which it powers off (no nvboot.off=reset), and without the image's
// acpi=noirq, since ACPI routes its virtio-mmio interrupts (host/vm says
// why each, measured).
//
// Many guests of one image share its text store (BootOptions.SharedText,
// shared.go): each maps the image's own pmem-text.img as a read-only
// NVDIMM (vm.NVDIMM.ReadOnly: QEMU opens it read-only and maps it as ROM,
// share=on, so the texts are in the host's page cache once; the NFIT says
// "not armed" and the guest's kernel makes /dev/pmem0 read-only, which
// nvinit then never writes), its state and kernel region from a pmem
// directory of its own (CopyGuestPmem), its disk read-only (QEMU locks a
// writable disk against a second QEMU; the appliance writes its disk only
// in a UEFI board's A/B update, refused here), under the image's shared
// lock (LockImageShared). NVDIMMs over e820 regions there, because the
// e820 table has no read-only pmem: the guest would take writes the ROM
// drops silently; the NFIT's ACPI costs the boot about 40 ms at 1 GIPS,
// and the board boots the card's kernel (no kernel region on it). One of
// many on its host, such a guest has free page reporting and, under TCG,
// a translation cache of SharedTCGCacheMiB (vm.Config's fields).
//
// An arm64-virt image boots on QEMU's virt board (armBoard): QEMU's boot
// stub enters the Image directly with the image's command line (no
// firmware runs; Firmware without BootDisk is refused), vm adds
// console=ttyAMA0 (the PL011), and the text store, the state, the kernel
// region and, under DiskAsPmem, the disk are device-tree pmem-region nodes
// after the RAM
// (vm.PmemDeviceTree: the board has no e820, and plugs NVDIMMs only with
// ACPI, which it gives a guest only through UEFI firmware; PmemAs e820,
// the default, stands for them, nvdimm is refused). The device tree
// describes every device, so there is no ACPI to turn off and nvinit
// powers off through PSCI (no nvboot.off=reset). The kernel region holds
// the Image itself (already uncompressed; the root's copy is
// /lib/nvboot/Image), booted and charged as on the pc board (below).
// With BootDisk the virt board is a UEFI board: AAVMF (vm.AAVMFCode, or
// BootOptions.Firmware) boots disk.img's UKI, and the text store and
// state are NVDIMMs its ACPI tables describe (vm.PmemNVDIMM; the firmware
// gives the kernel no device tree, so device-tree regions and e820 are
// refused): what nvboot run -firmware uefi and the A/B update run on
// (docs/UPDATE.md).
//
// # Kernel on pmem
//
// The kernel is read-only code like the services' text and is kept the
// same way: uncompressed (the PVH vmlinux, host/kernel; on arm64 the
// Image), in a raw pmem region (format/kernelpmem). ChooseKernel is the
// firmware's choice: the region's kernel when its header is valid, its
// bytes hash to the header's SHA-256 and that hash is the image's
// (image.json UncompressedSHA256); otherwise the card's bzImage or Image. A region left by another image or damaged
// is never booted; the command line says which was taken
// (nvboot.kernel=pmem|card), and after a card boot nvinit rewrites the
// region from the root's copy once every service is ready. Only the direct
// boot of an e820 board or of the virt board has this firmware
// (regionBoard, BootKernelOf); UEFI boots and NVDIMM boards get neither the
// region nor the parameter. QEMU copies the kernel by fw_cfg DMA (on the
// virt board it loads the Image from the host file), which the instruction
// counter does not see, so nvboot measure charges the copy at PmemReadBPS
// (1 GiB/s over the kernel's allocated sections, as a loader by section
// headers copies them, not the padding its segments carry; over an arm64
// Image's file, the kernel clearing its own .bss: loadedBytes), a
// byte-at-a-time copy on the 1-GIPS core: it errs long. On arm64 the region
// saves the card read alone (an Image has no decompressor to skip): 6.8 MiB
// at the sd model's 40 MiB/s against the same bytes at 1 GiB/s.
//
// # gokrazy instance configs
//
// A gokrazy instance's config.json builds as it is (gokrazy.go): a package
// outside nvboot's module is built in the instance's builddir/<pkg> (the
// nearest directory up holding a go.mod, as gokrazy looks), else in a
// module of its own made with go get; ExtraFilePaths (PATH_GOARCH.tar of the
// image's GOARCH, then PATH.tar, then PATH) and ExtraFileContents are placed through os.Root, so
// nothing lands outside the root or replaces a file the build placed (an
// extra file does take the place of one of every image's /etc files,
// below). A config with gokrazy fields also gets what gokrazy's packer
// puts in a root beyond those, unless an extra file does:
// /etc/ssl/ca-bundle.pem (a link to the image's CA bundle) and /var ->
// /perm/var. Every image has /perm -> /nv/state (rootfs/skeleton).
//
// # What an ordinary Linux host gives its programs
//
// Go's resolver, crypto/x509 and net.LookupPort read /etc, and a root
// without it breaks ordinary servers: with no /etc/hosts and no
// /etc/resolv.conf a lookup of localhost went to a DNS server on ::1 and
// failed. Every image (rootfs.go, after the extra files, which win) has:
//
//	/etc/hosts        localhost and the hostname on 127.0.0.1 and ::1
//	/etc/hostname     the hostname
//	/etc/resolv.conf  the config's Nameservers (QEMU's 10.0.2.3 on the
//	                  default network)
//	/etc/ssl/certs/ca-certificates.crt   the build host's CA bundle
//	/etc/services     the build host's (netbase)
//
// and nvinit gives each service a writable HOME (on the state, else the
// tmpfs) and /tmp; the kernel has IPv6 for ::1 (kernel-config/README.md).
//
//   - resolv.conf at build time over a link into a tmpfs written at boot:
//     the network is static (no DHCP client), so the file never changes
//     while the image runs and the boot writes nothing. A DHCP client
//     would need /etc/resolv.conf -> /run/resolv.conf, as gokrazy links it
//     into /tmp.
//   - The hostname on loopback over an interface's address: it resolves
//     whatever the network does.
//   - The build host's CA bundle over Go's x509roots/fallback: the
//     fallback works only in a program that imports it, and each program
//     would carry its own copy; the bundle is Mozilla's roots as Debian
//     ships them, as fresh as the build host. A build host without it (or
//     without /etc/services) builds an image without it, with a warning.
//   - No /etc/nsswitch.conf: Go's resolver reads /etc/hosts before DNS
//     when it is absent.
//
// Buildroot and Yocto install the same files: rootfs/appliance/etc holds
// EtcFiles for rootfs/appliance/appliance.json, and their ca-certificates
// and netbase (or skeleton) give the host files at the same paths.
//
// # u-root userland
//
// With Userland "u-root" the image carries u-root's core commands
// (cmds/core/* at the version nvboot's go.mod requires) built in busybox
// mode, one OFF2F program /bbin/bb and a link per command, and gosh on the
// console. nvboot runs gobusybox's makebb as a tool, in a module of its own
// that requires u-root at that version (so makebb and x/tools are the
// versions u-root pins, which build with the Go in use), after listing the
// commands with go list and pinning them with go mod tidy. Nothing of
// u-root's or gobusybox's code is copied. The binary is the same bytes from
// build to build and is cached under $NVBOOT_CACHE/userland (else the
// user's cache directory), keyed by the Go version, go.mod, go.sum, the
// generated tools.go and the tags: makebb takes about a minute on two
// cores, a cached build a second.
//
//   - Left out of core: init (nvinit is init), poweroff and shutdown (they
//     call reboot(2) at once; nvinit's commands stop the services and
//     unmount first; /sbin/poweroff, reboot and start are links to nvinit).
//   - gosh is built with the tag goshsmall: its line editor puts the
//     terminal in raw mode and waits for answers to colour and cursor
//     queries that a serial console fed by a pipe never sends, so gosh
//     waited for ever. goshsmall falls back to a line reader (no editing
//     or completion; the kernel's line discipline still gives backspace and
//     Ctrl-U). u-root's rush reads lines too but is experimental and
//     outside core.
//   - /bbin apart from /bin, as u-root names it, so no service's name can
//     clash with a command's.
//
// # Other builders
//
// Assemble (nvboot assemble) takes a root tree that Buildroot or Yocto
// filled (programs converted in place by rootfs/off2f-programs.sh, texts in
// /lib/off2f, the MANIFEST, nvinit's config) and writes the images with
// Build's own phases: for the same tree the same bytes. InPlace writes the
// provisioning images into the tree and only the pmem images out, for a
// builder that makes the disk itself (Yocto's wic). buildroot-ext/README.md
// and yocto/README.md describe the builders.
//
// # Invariants
//
//   - The same inputs give the same bytes: TestBuildIsReproducible. Each
//     layout's image reads back (e2fsck -fn, cpio, the configs inside, the
//     ESP through mtools, the UKI's sections): TestLayouts. The UKI:
//     TestWriteUKI, TestPEChecksumMatchesTheToolchain (our PE checksum is
//     the one GNU ld and objcopy write), TestPinPERejects.
//   - The output directory is never someone else's: TestBuildOutputDirectory,
//     TestBuildRefusesProjectDirectory, TestBuildRefusesFileAsOutput,
//     TestCheckOutAcceptsBuilds, TestRemoveStale, TestBuildInterrupted,
//     TestBuildBadInput, TestBuildRelativePaths, TestLockImage,
//     TestBuildRefusesLockedImage; nor a mount point:
//     TestCheckOutRefusesMountPoint, TestMountedOn. A rebuild never drops
//     a device's state: TestRebuildKeepsState, TestStateCompatible,
//     TestApplianceRebuildKeepsState (QEMU).
//   - arm64: the demo with GOARCH=arm64 builds an image whose programs,
//     texts and loader are aarch64, image.json saying arm64, with an arm64
//     UEFI disk, reproducibly; kv runs under qemu-aarch64-static:
//     TestBuildArm64. Its board: TestVMConfigArm64; booted by nvboot run,
//     kv keeps a key in pheap's dax mode across a power-off: TestRunArm64
//     (host/nvbootcmd); through AAVMF, updated A/B and deployed to:
//     TestRunUEFIUpdateArm64 (host/nvbootcmd). Another machine's service,
//     an x86 kernel, a Pi card with a layout that needs pmem or a kernel of
//     its own, and the Pi's board with another target are refused before
//     anything is built: TestBuildRefusesMixedMachines. The UKI of each machine:
//     TestWriteUKI, TestPEChecksumMatchesTheToolchain.
//   - The base leaves out what a service's change makes differ and
//     changes with anything else on the root: TestBase.
//   - Tools are checked first, each named with its package (the cross
//     ones for arm64): TestCheckTools.
//     A library package is refused as a program: TestGoBuildRefusesLibrary.
//     A truncated disk is refused before it boots, saying what each
//     partition lacks: TestCheckDisk, TestApplianceTruncatedDisk (QEMU).
//   - The firmware boots only this image's intact region: TestChooseKernel;
//     a blanked region boots the card, nvinit rewrites it, the next boot
//     takes pmem: TestKernelRegionRewritten, on arm64 (the Image in a
//     device-tree region) TestKernelRegionRewrittenArm64 (QEMU). The board:
//     TestVMConfigBoard (the boards and pmem transports, and what a board
//     cannot carry), TestVMConfigArm64KernelRegion. Slots: TestSlotsLayout, TestSlotsRefusesInitramfs.
//   - gokrazy: TestPlaceGokrazy, TestPlaceGokrazyRefuses, TestImportDir,
//     TestApplianceGokrazyPrograms (QEMU). The skeleton and the other
//     builders' config and /etc files: TestInstallSkeleton,
//     TestRootfsApplianceConfig (NVBOOT_UPDATE=1 regenerates
//     rootfs/appliance). Every image's /etc: TestPlaceEtc; nats-server and
//     mochi-mqtt from the module proxy and a check of the host answer in
//     QEMU: TestApplianceHostEnvironment.
//   - Booted in QEMU: TestApplianceLifecycle (blank, damaged and stale
//     stores, state kept), TestApplianceStateProvisioning,
//     TestApplianceRepairsDamagedText, TestApplianceBootsDamagedInit
//     (nvinit's text damaged in the store: its loader runs the clean copy,
//     nvinit repairs the store's), TestApplianceInitBothCopiesDamaged (the
//     panic names both copies), TestAppliancePooledService,
//     TestApplianceUserland (each userland; with u-root, commands typed on
//     the console run from text mapped from /nv/text, and poweroff in gosh
//     reaches nvinit), TestUEFIBootsTheDisk (OVMF, no -kernel: kv answers).
//   - A Pi card reads back with sfdisk, mtools and e2fsck (autoboot.txt,
//     each slot's cmdline.txt, nvinit's config, aarch64 programs, the
//     state on the data partition): TestBuildRPi; it boots in QEMU's
//     raspi3b to kv ready on the card's state, and takes a deploy there:
//     TestRPiDeployInQEMU; the update endpoint's test boot restarts the
//     kernel with "0 tryboot", slot B is committed, and a test boot that
//     panics falls back: TestRPiTestBootInQEMU. The elf layout's image id names
//     its programs: TestImageIDNamesThePrograms.
//   - A shared text store: the board, the refusals and the lock,
//     TestVMConfigSharedText, TestLockImageShared; two guests of one image
//     at once, both QEMUs mapping the image's pmem-text.img, kv and nvinit
//     run from it on DAX, each kv with its own state, every write a root
//     process tries refused and a forced one dropped, the file unchanged:
//     TestSharedTextStore (QEMU).
//
// # Limits
//
//   - amd64-pc, arm64-virt and arm64-rpi. A Pi card (elf layout, the
//     kernel package's kernel) boots in QEMU's raspi3b in tests only, with
//     the firmware played (internal/testutil/raspi); no real Pi has booted
//     one.
//   - The Buildroot and Yocto trees (Assemble) are amd64's.
//   - The board firmware that boots the kernel region is modelled, not
//     shipped: a real board boots the card's UKI.
//   - The UKI is unsigned (no Secure Boot); only OVMF and AAVMF in QEMU
//     are tested, not a real board's firmware.
//   - The disk's data partition has no use yet.
//   - With a u-root userland, nvboot run's Ctrl-C goes to nvboot, which
//     powers off, so a command in the guest shell cannot be interrupted
//     from there; lines typed before the shell starts may be lost. Only
//     nvboot build builds a userland (the Buildroot and Yocto builders
//     install none).
//   - The bigalloc store spends up to 2 MiB of pmem per file.
package appliance
