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
//	GET  /update/features     architecture, features ("deploy", or
//	                          "deploy-elf" without a text store), and on a slotted boot
//	                          the slot, committed or not, the image and boot
//	                          ids, the inactive slot's partition sizes;
//	                          InitText when nvinit ran its clean copy
//	                          (Server.InitText)
//	POST /update/texts/have   which of these texts the store holds, each
//	                          with a clean copy (else it is to be sent)
//	PUT  /update/deploy       a program's header file, then its text unless
//	                          the store has it (without a text store: the
//	                          whole program); answered when the trial ended
//	POST /update/gc           remove what no service runs
//	PUT  /update/root, /boot  the inactive slot's partitions, written and
//	                          read back
//	POST /update/testboot     BootNext to the inactive slot, for the hashes
//	                          named
//	POST /reboot              answered, then the reboot
//	GET  /update/pull         what nvpull last wrote of its status
//
// At most one deploy, gc or slot write runs at a time: another gets 409,
// before its body is read.
//
// For nvpull (the appliance's puller, device/pull) the same Server is
// served on a unix socket (ServeLocal: contract.PullSocket, 0600, plain
// HTTP), where the one password is the token nvinit gives nvpull
// (PullToken, user contract.PullUser); the token is refused on the
// network, the network's password on the socket. GET /update/pull serves
// the status nvpull writes (PullStatus), what nvboot status shows.
//
// # Connections
//
// The endpoint runs in PID 1, so what one client can hold of it is
// bounded (Limits; defaults in brackets): open connections [16], one more
// turned away at once (plain HTTP: a 503 saying so; TLS: closed) rather
// than queued; a request's headers [10 s, 64 KiB] and the TLS handshake; a
// kept-alive connection's idle time [30 s], with or without the password;
// a body's rate: each [1 MiB] must arrive within [30 s] of the endpoint
// waiting for it, or the request ends with 408 (the time the endpoint
// spends writing does not count, so a large upload at a sane rate
// completes; a stall or a trickle does not hold the connection, nor the
// lock); an answer's write [30 s] from its first byte. There is no bound
// on a whole request: a deploy's answer waits for its trial.
//
// # Deploy
//
// A deploy's headers give the service, the sizes of its two parts, the
// SHA-256 of the whole body and the readiness deadline (default 30 s, at
// most 10 min). Before a byte of the body is read the endpoint checks,
// answering 400 naming what is wrong: the service is one of the image's;
// the sizes and hash are well formed, the whole at most
// contract.MaxDeployBody (256 MiB) and the header file at most
// contract.MaxDeployHeader (16 MiB); a Content-Length is the sizes' sum.
// Then it takes the lock (409 when another deploy, gc or slot write holds
// it) and asks the store's filesystem for room (statfs: 507 when the
// upload is larger than its free space). It then receives the body: the
// header file into memory, the text through one fixed buffer (1 MiB) into
// the store's uploads/ directory, each full buffer in its own read-write
// window on the supervisor's goroutine, zero pages left as holes, the
// body's SHA-256 and the text's own hash computed as it streams. Then, in
// this order (400): the body was exactly as long as announced; it hashes
// to the announced SHA-256; the header file is an ELF for this machine and
// an OFF2F header whose note names this store; the text, if sent, parses,
// hashes to its header's hash and is the one the note names. A body that
// ends early is refused (400), one that stalls ends with 408; either way,
// and for every refusal, the staged text is removed before the answer. A
// header without its text, whose text the store lacks, is refused (409).
//
// # Without a text store
//
// An image of the elf layout (a Raspberry Pi's, an elf image on a PC) has
// no text store; its Programs (NewELFPrograms, deployelf.go) is a
// directory on the state filesystem, contract.ELFDeployDir, laid out as
// below (programs/, services/, uploads/), and its features say
// contract.FeatureDeployELF. One handler serves both kinds of deploy;
// what differs is named in one place, a deployKind (textDeploy,
// elfDeploy). A deploy there is one whole static program
// (contract.HeaderProgramSize bytes, no header file or text), checked
// before its body exactly as above (the room on the state's filesystem),
// streamed through the same buffer into uploads/program, fsynced and
// hashed; then the length, the hash, and the program: an executable ELF
// for this machine with a loadable segment and no interpreter (an OFF2F
// header file and a dynamically linked program are refused, each by
// name). It is renamed to programs/SHA256 and tried exactly as a text
// store's program; the state is read-write already, so a step is no
// remount. No clean copy is kept: the program is not on pmem. The
// wrong kind of upload, either way, is refused naming what the image
// takes; /update/texts/have answers 409. gc removes the programs no link
// names and an interrupted upload.
//
// # Clean copies
//
// A damaged text is repaired from a clean copy the program's note names
// (its fallback directory), off the text store's pmem: nvinit's text
// repair hashes the copy and rewrites the store's text from it
// (device/nvinit), and the loader falls back to it when the store's text
// fails its header check. Before a deployed program is written the
// endpoint makes sure its text has one, and rewrites the header file's
// note to name it (off2f.WithFallbackDir; the header file is then named by
// the SHA-256 of those bytes): the image's copy in /lib/off2f when the
// image has the text (not read: the repair checks it before use); else
// the copy in CleanSubdir on the state filesystem (/nv/state/nvboot/off2f,
// named by the hash), hashed and kept when sound, otherwise written from
// the staged upload (or, when only the header file came, from the store's
// text), hashed as it is copied, through a temporary file, fsynced,
// renamed, the directories fsynced. A source that does not hash to the
// note writes nothing: a header-only deploy whose text the store holds
// damaged, with no sound copy, is refused (409) and the damaged copy
// removed, so the same deploy again sends the text. With no state mounted
// no copy can be kept, and a deploy of a text the image lacks is refused
// (409); a full state filesystem answers 507. /update/texts/have counts a
// text as held only with a copy (its presence, not its hash), so the
// host sends a text that has none.
//
// Deployed programs live on the text store beside their texts: header files
// in programs/, named by the SHA-256 of their bytes; one link per deployed
// service in services/ naming what it runs; SERVICE.trial, while a new
// program is on trial, naming the one before; uploads/text, while an
// upload is received, its text. A deploy, each store step one read-write
// window of the store on the supervisor's goroutine: stage the text (a
// window per buffer, then fsync); make its clean copy durable (above, off
// the store and off the supervisor's goroutine); rename it to its hash
// (kept when the same text is there) and write the header file (temporary file, fsync,
// rename, kept when the same bytes are there); stop the service; switch (SERVICE.trial to the
// current program, then a new link renamed over SERVICE: the switch is
// that rename); start it from its link; ready within the deadline: remove
// SERVICE.trial (kept), otherwise stop it, rename SERVICE.trial back, start
// the old one (rolled back). At boot, before any service starts, every open
// trial is undone, an upload's staged text removed, and each service with
// a link starts from it; a store provisioned again (a new image) has no
// links, so the image wins.
//
// gc removes the programs no link names and the texts neither the image's
// MANIFEST nor a linked program needs, then the leftovers of interrupted
// writes and uploads, then the clean copies no linked program's text needs
// and those an interrupted copy left; it is refused while a trial is open.
// What it reports freed is the growth of the store's free space (statfs)
// across the removals, not the files' lengths: the store allocates in
// 2 MiB clusters, so a header file of a few KiB frees a whole cluster
// (TestGCCountsWhatTheStoreFrees).
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
// The firmware is a SlotFirmware, UEFI's BootSlots or a Raspberry Pi's
// Tryboot (tryboot.go; contract.Slots.Firmware says which). On a Pi the
// card's config partition holds autoboot.txt (format/tryboot): [all] names
// the committed slot's boot partition, [tryboot] the other's. A boot whose
// slot (nvboot.slot in its cmdline.txt) is not [all]'s came from the
// firmware's one-shot tryboot flag: a test boot. The watchdog is the
// BCM2835's, 15 s (its limit). /update/testboot makes sure [tryboot]
// names the new slot and has the reboot that follows hand the kernel "0
// tryboot" (SlotState.RebootArg, which nvinit's halt passes with
// LINUX_REBOOT_CMD_RESTART2); any later reset boots [all] again. The commit
// rewrites autoboot.txt with the two partition numbers swapped, in place:
// the same length, one sector, no directory entry or FAT changed, never
// through a mounted vfat; fsynced and read back past the page cache.
//
// A slot write is served only on a committed slotted boot through UEFI.
// Before a byte is written the endpoint checks the architecture header,
// that the size is given and fits the partition, that the hash is 64 hex
// digits, and that the first 4 KiB are an erofs or ext4 superblock (root)
// or a FAT boot sector (boot), and that a Content-Length is the size. The
// body streams into the inactive partition through SHA-256 (a stall ends
// it with 408, the partition not marked written); the device is fsynced, its page cache dropped
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
//   - A whole program on the state over a text store on a card, for an
//     image without pmem, because nothing maps text from a card faster
//     than the kernel reads the program, and the state is the one
//     writable filesystem there; the links, trial and recovery are the
//     text store's, so nvinit's supervisor serves both alike. The cost:
//     every deploy sends the whole program.
//   - A Pi's autoboot.txt rewritten in place over written through a
//     mounted FAT, because a vfat rewrite (truncate, write, fsync) passes
//     through an empty or half-written file, and a firmware that cannot
//     read autoboot.txt boots partition 1, which holds no kernel.
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
//   - A deploy's text staged in the store over memory or /tmp (a tmpfs,
//     memory too), because an upload of the size the protocol allows
//     (256 MiB) held in memory exhausts the appliance's RAM: the kernel
//     kills a service, then panics. The store is where the text ends up, so
//     the staged file is renamed into place.
//   - A deployed text's clean copy on the state filesystem over the root
//     or the text store, because the root is a read-only erofs and the
//     store is the pmem whose damage the copy repairs; the state is the
//     one other writable filesystem every image has (StateMiB, default
//     128 MiB). An image's text is not copied again: its copy on the root
//     is named.
//   - The clean copy named in the program's note over a path nvinit
//     derives from the hash, because the loader and the repair then find
//     a deployed program's copy exactly as an image program's.
//   - A read-write window per buffer over one for the whole upload,
//     because the supervisor's goroutine (every window runs there) must not
//     wait on the network, and the store stays writable only for a local
//     write of at most a buffer; a 256 MiB text takes 258 windows.
//   - A connection over the limit turned away over queued, because Accept
//     then never stops and the client is told why; the bound is on file
//     descriptors in PID 1, which a queue in the listener would not hold
//     either way.
//
// # Invariants
//
//   - Nothing outside uploads/ is written before a deploy's upload arrived
//     whole and checked; a refused, cut or stalled upload's staged text is
//     removed before the answer, one a power cut left at the next boot, so
//     a refused upload leaves the store byte for byte as it was. A staged
//     text has no text's name: nothing takes it for one.
//   - A program is kept only after it was marked ready; a trial cut short
//     by anything is undone by the next boot, before any service starts.
//   - A deployed program is written only once its text has a clean copy
//     off the text store, hashed and durable, that its note names; nothing
//     is ever copied from a text that does not hash to the note.
//   - The text store is read-only except between the remounts of one step.
//   - One deploy, gc or slot write at a time, the lock taken before a body
//     is read and given back whatever ends the request; one trial per
//     service.
//   - The endpoint's memory is bounded whatever arrives: one upload at a
//     time, holding its header file (at most 16 MiB) and a 1 MiB buffer;
//     at most 16 connections, their headers at most 64 KiB each.
//   - On a Pi nothing changes [all] but the commit, and the tryboot flag is
//     set only by the reboot after /update/testboot: TestTrybootSetup,
//     TestTrybootCommitsOrReboots, TestTrybootTryNext,
//     TestUpdateSlotEndpointsTryboot (on real FAT32 filesystems).
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
//   - A store that does not mount runs the image's programs (the links
//     are in it). An image without a text store deploys only with its
//     state mounted, and its programs count against StateMiB until a gc. A state that is provisioned again (blank) loses the
//     deployed texts' clean copies: their repair then says the copy is
//     missing until the next deploy. A damaged text the store keeps
//     because an upload brought the same one (same size and header page)
//     is repaired only when its program fails.
//   - Clean copies on the state count against StateMiB, beside the
//     services' own state, until a gc.
//   - Every deploy adds its text and header file to the store until a gc;
//     a store without room for an upload refuses it before its body is
//     read, counting the text whole (its holes and a text the store holds
//     already are not subtracted).
//   - A client with the password that keeps the minimum rate holds the
//     lock for as long as its upload takes (256 MiB at 1 MiB per 30 s:
//     about two hours). A flood of connections keeps others out while it
//     lasts, each connection for at most the header or idle timeout.
//   - A hang before nvinit opens the watchdog (firmware, stub, early kernel)
//     is not caught. A Pi's tryboot flag is set by the reboot, not kept as
//     BootNext is: a power cut between /update/testboot and the reboot boots
//     the old slot, untried. No real Pi's firmware has run the tryboot here. A board booted without UEFI, or without a watchdog,
//     runs its slot with no test boot. A slotted boot serves the A/B update
//     even when its text store did not mount (deploys then answer 409).
//   - State is shared by both slots: a service that changes its state
//     format must still read the old one. The whole root and boot partition
//     are sent each time (no delta); a root that outgrows its partition
//     needs a reflash.
package update
