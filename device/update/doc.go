// Package update is the appliance's update endpoint, which nvinit serves
// when its config has an Update password: `nvboot deploy` replaces one
// service's program without a reboot, `nvboot update` the whole image,
// A/B with a test boot. The endpoints, headers, answers and device paths
// are the contract both sides import (device/contract, update.go and
// slots.go).
//
// nvinit hands it what only nvinit has: its Supervisor (a deploy's store
// steps and its trial run on the supervisor's goroutine), the mounted text
// store (Programs, readied at boot by Programs.UseDeployed), a way to
// reboot, and on a slotted boot the slots (SlotBoot.Start, then SlotState
// commits the test boot once every service was ready).
//
// # The protocol
//
// Every request is authenticated by HTTP Basic, user contract.UpdateUser and
// the config's password, user and password compared in constant time;
// answers are JSON. With the config's certificate the endpoint is HTTPS only
// (TLS 1.3); the host pins that certificate rather than trusting a CA.
//
//	GET  /update/features     architecture, features, and on a slotted boot
//	                          the slot, committed or not, the image and boot
//	                          ids, the inactive slot's partition sizes
//	POST /update/texts/have   which of these texts the store holds
//	PUT  /update/deploy       a program's header file, then its text unless
//	                          the store has it; answered when the trial ended
//	POST /update/gc           remove what no service runs
//	PUT  /update/root, /boot  the inactive slot's partitions, written and
//	                          read back
//	POST /update/testboot     BootNext to the inactive slot, for the hashes
//	                          named
//	POST /reboot              answered, then the reboot
//
// At most one deploy, gc or slot write runs at a time (409 for another).
//
// # Deploy
//
// A deploy's headers give the service, the sizes of its two parts, the
// SHA-256 of the whole body and the readiness deadline (default 30 s, at
// most 10 min). Before anything is written the endpoint checks, in this
// order, answering 400 naming what is wrong: the service is one of the
// image's; the sizes and hash are well formed; the body is exactly as long
// as announced; it hashes to the announced SHA-256; the header file is an
// ELF for this machine and an OFF2F header whose note names this store;
// the text, if sent, parses, hashes to its header's hash and is the one the
// note names. A header without its text, whose text the store lacks, is
// refused (409). The body is read as it arrives and held in memory, never
// sized by what the headers claim.
//
// Deployed programs live on the text store beside their texts: header files
// in programs/, named by the SHA-256 of their bytes; one link per deployed
// service in services/ naming what it runs; SERVICE.trial, while a new
// program is on trial, naming the one before. A deploy, each store step one
// read-write window of the store on the supervisor's goroutine: write the
// text and the header file (temporary file, fsync, rename, kept when the
// same bytes are there); stop the service; switch (SERVICE.trial to the
// current program, then a new link renamed over SERVICE: the switch is
// that rename); start it from its link; ready within the deadline: remove
// SERVICE.trial (kept), otherwise stop it, rename SERVICE.trial back, start
// the old one (rolled back). At boot, before any service starts, every open
// trial is undone and each service with a link starts from it; a store
// provisioned again (a new image) has no links, so the image wins.
//
// gc removes the programs no link names and the texts neither the image's
// MANIFEST nor a linked program needs, then the leftovers of interrupted
// writes; it is refused while a trial is open. What it reports freed is
// the growth of the store's free space (statfs) across the removals, not
// the files' lengths: the store allocates in 2 MiB clusters, so a header
// file of a few KiB frees a whole cluster (TestGCCountsWhatTheStoreFrees).
//
// # Update
//
// A slotted disk (contract.SlotPartitions) holds two roots and two boot
// partitions, each a FAT filesystem with its slot's UKI, whose command line
// names its own root and contract.SlotParam. SlotBoot.Start arms the
// watchdog (contract.WatchdogDevice, 30 s, petted every 5 s; disarmed only
// for a power-off, so a shutdown that hangs on its way to a reboot still
// resets), mounts efivarfs and makes sure both slots have Boot#### entries
// (an entry for the same partition and file is kept, rewritten if the
// partition moved; a missing one takes the lowest free number; the
// firmware's and other systems' entries are left alone). When BootOrder
// starts with the other slot this boot is a test boot (mark slot-trial),
// and BootOrder is not touched; otherwise the booted slot is the committed
// one (mark slot-committed), and BootOrder starts with it and then the
// other slot. The firmware deletes BootNext before it boots it, so every
// reset after a test boot boots the committed slot: a kernel panic (panic=10
// on the slot's command line), a hang (the watchdog), or nvinit's own
// reboot when the services were not all ready within the test boot's
// deadline. Once every started service has been marked ready, BootOrder is
// written with the booted slot first: one variable write, the commit.
//
// A slot write is served only on a committed slotted boot through UEFI.
// Before a byte is written the endpoint checks the architecture header,
// that the size is given and fits the partition, that the hash is 64 hex
// digits, and that the first 4 KiB are an erofs or ext4 superblock (root)
// or a FAT boot sector (boot). The body streams into the inactive
// partition through SHA-256; the device is fsynced, its page cache dropped
// (BLKFLSBUF) and the partition read back from the disk and hashed.
// /update/testboot sets BootNext only when both partitions were written and
// read back in this boot with exactly the hashes the request names.
//
// # Decisions
//
//   - The endpoint lives inside nvinit over a service of its own, because
//     everything a deploy does is nvinit's work already (stop a supervised
//     service, remount the store on the supervisor's goroutine, start it
//     and watch its WaitFor): a separate service would need a control
//     protocol into nvinit for each step, and would itself have to be
//     supervised, deployed and authenticated. The cost: nvinit links
//     net/http, and a handler's bug runs in PID 1 (net/http recovers a
//     panicking handler).
//   - The switch is a link in the text store over a changed config or a
//     file on the root, because the root is a read-only erofs, checked by
//     hash in an A/B update, and the store is already where programs' bytes
//     live and is written only through remounts.
//   - Header files are named by their hash, so a program is never
//     overwritten while it may run (the kernel maps its data segments from
//     the file) and a rollback always finds the old one.
//   - Ready means WaitFor answered while the process runs, as at boot; a
//     service without WaitFor is kept as soon as it forks.
//   - UEFI's BootNext over switching the slot in a file on the disk, because
//     the one-shot boot a test needs is then kept in the firmware, not on the
//     disk being replaced, and a reset falls back by itself.
//   - Each slot's UKI on a boot partition of its own over files on the one
//     ESP, because the appliance kernel has no FAT filesystem: the device
//     writes a whole partition, as it writes the root, and the firmware
//     reads FAT on any partition.
//   - Roots named by device over PARTUUID, because the partitions' GUIDs
//     derive from the hostname and layout, and an update to an image of
//     another hostname must still find its root.
//
// # Invariants
//
//   - Nothing is written before a deploy's upload arrived whole and
//     checked; a refused upload leaves the store byte for byte as it was.
//   - A program is kept only after it was marked ready; a trial cut short
//     by anything is undone by the next boot, before any service starts.
//   - The text store is read-only except between the remounts of one step.
//   - One deploy, gc or slot write at a time; one trial per service.
//   - Nothing the firmware boots changes before both of the inactive slot's
//     partitions were read back with the hashes named: a short, corrupt or
//     foreign upload leaves the committed slot and the boot variables as
//     they were. During a test boot every slot write is refused: the other
//     slot is the way back.
//
// # Limits
//
//   - Without TLS the password and the program cross the network in the
//     clear. With it, the key is on every image's root filesystem.
//   - Pooled services (poold keeps its own program paths) and DontStart
//     services cannot be deployed. A program that becomes ready and fails
//     a moment later is kept.
//   - A deployed text has no fallback copy: a store that does not mount
//     runs the image's program, and a damaged deployed text is not repaired.
//   - A deploy's upload is held in memory (up to contract.MaxDeployBody)
//     before it is checked. Every deploy adds its text and header file to
//     the store until a gc; a full store refuses the deploy before the
//     service is touched.
//   - A hang before nvinit opens the watchdog (firmware, stub, early kernel)
//     is not caught. A board booted without UEFI, or without a watchdog,
//     runs its slot with no test boot. A slotted boot serves the A/B update
//     even when its text store did not mount (deploys then answer 409).
//   - State is shared by both slots: a service that changes its state
//     format must still read the old one. The whole root and boot partition
//     are sent each time (no delta); a root that outgrows its partition
//     needs a reflash.
package update
