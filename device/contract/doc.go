// Package contract is the device contract: where things are on an nvboot
// appliance, the kernel parameters the VM runner passes, the configs
// nvboot build writes for nvinit (InitConfig) and poold (PooldConfig), and
// the update endpoint's messages. The host (host/image/appliance,
// host/image/derive, host/deploy) and the device (device/nvinit,
// device/poold) both import it, so neither imports the other. It imports
// only formats and libraries (format/bootmark; off2f and pool for their
// default paths), no host code, so what a device links stays small.
//
// # Design
//
// One contract over each side keeping its own copy of the paths and
// shapes: what the host writes and the device reads is defined once. The
// types are data: JSON shapes with their defaults and one Validate each,
// which reports every wrong field (errors.Join), named by its path
// (Services[1].WaitFor, Programs[0].Allow[1]), and changes nothing. Parsing
// is strict: an unknown field or a second JSON value is an error, so a
// misspelt field is never silently ignored. What only the device can check
// (that a user exists, a path is executable) is the reader's job: poold
// resolves user and group names when it loads its config.
// host/image/derive makes both configs from an image config and validates
// them before anything is built.
//
// # Where things are on the device
//
//	/sbin/nvinit                 init (Init)
//	/sbin/poweroff, reboot, start links to nvinit with a userland: run by
//	                             that name it writes the command to
//	                             /run/nvinit.cmd (CommandFIFO, InitCommands)
//	/bbin/bb, /bbin/<command>    the userland (UserlandDir)
//	/lib/ld-off2f.so.1           the loader (Loader)
//	/bin/<service>               services (BinDir; /nv/text/bin in dax-elf)
//	/lib/off2f/<hash>            fallback copies of the texts (FallbackDir)
//	/etc/nvboot/config.json      nvinit's config (InitConfigPath)
//	/etc/nvboot/poold.json       poold's config (PooldConfigPath)
//	/etc/nvboot/MANIFEST         the hashes the image needs (Manifest)
//	/etc/nvboot/update-cert.pem, update-key.pem  the update endpoint's TLS
//	/etc/nvboot/image-key.pem    the key pulled images are signed with
//	                             (ImageKeyPath), in images built with one
//	/etc/nvboot/version          the image's version (VersionPath), if any
//	/etc/nvboot/base             the image's base (BasePath): what a pulled
//	                             image's base annotation is compared with
//	/etc/nvboot/registry-auth.json, registry-ca.pem  the registry's
//	                             credentials and CA, for nvpull (pull.go)
//	/sbin/nvpull                 the puller, with Update.Registry (PullProgram)
//	/lib/nvboot/textstore.ext4   the store image, for provisioning (StoreImage)
//	/lib/nvboot/state.ext4.gz    the state template (StateImage)
//	/lib/nvboot/vmlinux          the uncompressed kernel (KernelImage)
//	/lib/nvboot/Image            an arm64 image's (KernelImageArm64)
//	/dev/pmem0 on /nv/text       text store, ro, dax=always (TextDevice, TextDir)
//	/nv/text/programs, services  deployed programs and their links
//	/dev/pmem1 on /nv/state      state, rw, dax=always (StateDevice, StateDir)
//	/nv/state/nvboot/off2f/<hash>  clean copies of deployed texts the image
//	                             lacks (device/update's CleanSubdir)
//	/nv/state/nvboot/pull        nvpull's state, status and downloads (PullDir)
//	/nv/state/nvboot/clock       the time nvinit last saved (ClockSavedPath)
//	/run/nvboot/update.sock      the update endpoint for nvpull (PullSocket)
//	/run/nvboot/clock-set        SNTP set the clock this boot (ClockSetPath)
//	/dev/pmem2                   the kernel region, raw (KernelRegionDevice)
//	/dev/vda2                    the root partition (RootDevice)
//	/dev/mmcblk0p1...7           a Raspberry Pi card's partitions, the
//	                             state on its data partition without DAX
//	                             (rpi.go: RPiPartitions, RPiDevice)
//	/run/poold.sock              poold's socket (PooldSocket)
//	/perm -> /nv/state           gokrazy's writable partition's path
//
// # Kernel parameters
//
// kparams.go: nvboot.off=reset (end with a reset where a board without ACPI
// cannot power off), nvboot.disklimit=DISK,rbps=N,riops=N,wbps=N,wiops=N
// (the storage model applied inside the guest, docs/DEVICE-CLOCK.md),
// nvboot.kernel=pmem|card (where the firmware took the kernel from), and
// nvboot.slot=a|b (update.go: the slot a UKI, or a Pi's cmdline.txt, boots). A board's command
// line has none of the first two. A malformed value is an error naming
// the parameter.
//
// # Update and slots
//
// update.go is the update endpoint both nvboot deploy and nvboot update
// talk to (paths, headers, answers); slots.go the A/B layout's partitions
// and devices, the watchdog and efivarfs paths, Slots.Firmware (UEFI or a
// Pi's tryboot); rpi.go the Pi card's partitions, its disk identifier and
// the tryboot reboot argument. docs/UPDATE.md describes both protocols.
// artifact.go is the OCI artifact nvboot push publishes for appliances to
// pull: media types, annotations, the signature and the image version's
// order (docs/UPDATE.md#the-oci-artifact). pull.go is the puller's side:
// its setting (Pull, in InitConfig), its paths, the local socket and token
// it reaches the endpoint with, and the status the endpoint serves
// (PullStatus, PathPull).
//
// # Invariants
//
//   - Validate reports every bad field, joined, by its path, and changes
//     nothing: TestValidateJoinsEveryError. Parsing is strict:
//     TestParseStrict.
//   - The kernel parameters parse or name what is wrong: TestParseDiskLimit,
//     TestOffByReset, TestKernelFrom, TestParseSlot; the Pi card's devices
//     and the slots' firmware: TestRPiPartitions, TestSlotsFirmware;
//     TestUpdateValidate, TestParseReadyDeadline.
//   - A signature verifies with its key and manifest only, never with
//     another key, another manifest or without the domain line:
//     TestSignature; a malformed blob is refused, naming why:
//     TestParseSignatureRejects, FuzzParseSignature. Versions order as
//     numbers: TestVersions. Pull's fields are named when wrong, and it
//     needs a state: TestPullValidate, TestParsePullStatusStrict.
//   - Every rlimit name the contract accepts is one poold sets:
//     TestRlimitNamesMatchContract (device/poold). The host's configs
//     satisfy it: TestFromImage, TestFromImageValidates (host/image/derive).
//   - The import rule (the device never links host code, the host never
//     links nvinit or poold) is held by internal/layers' TestImportRules.
//
// # Limits
//
//   - The device paths are fixed: an image cannot move the store, the state
//     or the loader.
//   - pmem namespaces are named by order (pmem0, pmem1, pmem2): the layout
//     relies on label-less namespaces appearing in region order.
package contract
