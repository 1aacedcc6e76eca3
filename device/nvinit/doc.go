// Package nvinit is PID 1 of the nvboot appliance: it boots the machine,
// supervises its services and shuts it down. cmd/nvinit links it; it
// exports Execute (init itself, and -check and -host on a build machine)
// and Command (nvinit run as /sbin/poweroff, reboot or start).
//
// Everything that touches the machine goes through a path or an injected
// value (the mounter, the sysfs root, daxSwitch.Write, the supervisor's
// clock), so the logic runs in host tests without root. What nvinit only
// calls is elsewhere: the update endpoint and the A/B slots in
// device/update, the boot marks, the device clock and the disk model in
// device/bootprof, the config and the kernel parameters in device/contract.
//
// # The boot
//
// boot.Run is a list of stages, run in this order, with a mark on the
// console (bootprof.Marker) where `nvboot measure` times the boot:
//
//	mark init
//	mountKernel       as PID 1: proc, sysfs, devtmpfs, /run, /tmp and cgroup2
//	                  mounted (already mounted is fine); /dev/console opened
//	                  if the kernel gave none; the kernel-handover, tsc and
//	                  kmsg-tsc marks; Ctrl-Alt-Del turned into SIGINT; the
//	                  command line read and its disk limit applied
//	mark mounts
//	loadConfig        the config (contract.InitConfigPath); the hostname
//	provisionStore    the text store current and mounted, or the fallback
//	                  chosen; interrupted deploys undone
//	mark store
//	repairOwnText     only when ld-off2f ran nvinit's clean copy
//	                  (OFF2F_FALLBACK): the store's copy checked and
//	                  repaired, below
//	provisionState    the state filesystem mounted (mark state); without
//	                  a text store, the deploy store on it readied
//	                  (update.NewELFPrograms): interrupted deploys undone
//	restoreClock      as PID 1: the clock set forward to the later of the
//	                  floor (Clock.FloorTime) and the time saved on the
//	                  state (contract.ClockSavedPath), when it reads before
//	                  them, and logged (clock.go)
//	mountDevices      the config's Mounts
//	configureNetwork  as PID 1: loopback, static addresses and routes
//	keepClock         as PID 1, on a goroutine (nothing waits for it): the
//	                  time saved every 10 min and at a clean shutdown; with
//	                  Clock.NTP, the SNTP client (device/sntp), which
//	                  steps the clock, saves it and writes ClockSetPath
//	probeFirstAnswer  as PID 1: the answered mark, when asked
//	startSlots        as PID 1 on a slotted image: watchdog, boot entries
//	                  or a Pi's autoboot.txt, the test boot (update.SlotBoot)
//	supervise         the services (and nvpull, with the config's Pull:
//	                  pull.go), the update endpoint (on the network with
//	                  Update, on a local socket for nvpull), the shell; until
//	                  SIGTERM (power off) or SIGINT (reboot, Ctrl-Alt-Del),
//	                  poweroff or reboot typed on the console, or, with
//	                  Poweroff, every service gone for good; mark shutdown
//	unmountAll        Mounts, state, store, after a sync
//	halt              as PID 1: reboot(2); after a Pi's test boot was asked
//	                  for, LINUX_REBOOT_CMD_RESTART2 with "0 tryboot"
//	                  (restart2.go), which sets the firmware's flag
//
// Inside the stages nvinit times steps in memory (bootprof.Steps: the
// kernel filesystems mounted, the handover marks printed, the disk model's
// cgroup, the config read, the store's device, MANIFEST and mount, the
// network, the supervisor started), a clock read each and no console line.
// With contract.ProfileParam on the command line it prints them, and the
// kernel's log, once every service is ready and the first answer is
// marked: `nvboot measure -profile`.
//
// At shutdown each service's process group gets SIGTERM, and SIGKILL after
// defaultGrace (5 s). Not PID 1, nvinit boots only with -host, refuses stray
// arguments and a missing config, leaves the kernel filesystems, hostname
// and reboot alone, and returns when done; as PID 1 it logs and ignores
// words the kernel passes on, and boots a config it cannot read with no
// services.
//
// # Text store
//
// storeSetup switches the namespace to fsdax if it is raw (daxSwitch, as
// `ndctl create-namespace -m fsdax` does), waits up to 2 s for the device
// node, and mounts the store read-only unless ld-off2f did; if its MANIFEST
// matches the image's, that is all. A stale store is unmounted, not lazily:
// EBUSY means a running program maps text from it, and that program is
// nvinit itself, so it re-executes itself with OFF2F_NOSTORE=1 (its text now
// the fallback copy) and rewrites the store then. A stale store, or one
// whose mount fails with EINVAL (no filesystem, a damaged one), is
// provisioned: the head zeroed, the body written and synced, the head (the
// primary superblock) written and synced last, so a copy cut short never
// mounts and is provisioned again at the next boot. A superblock that mounts
// without dax=always but not with it is an error, not a reason to copy.
// Every error is logged and the boot goes on: the loader falls back by
// itself.
//
// A store whose device is read-only (BLKROGET: one store the host maps into
// many appliances, an unarmed NVDIMM; host/image/appliance's SharedText)
// is never written: stale, blank or unmountable, it is not provisioned
// (the error says so, and a stale one stays mounted: the loader finds the
// texts it holds by their hashes and runs the fallback of the others); a
// damaged text in it is found but not repaired, and the update endpoint
// serves no deploys. One appliance must not change what the others run,
// and the device would refuse it anyway (TestStoreSetup's read-only
// cases, TestStoreSetupReadOnlyLoop, TestTextRepairReadOnlyStore).
//
// # State
//
// stateSetup mounts first, so a normal boot reads nothing more. Without a
// template (State.Image) nothing is written. A raw namespace is switched to
// fsdax only when blank, since the switch moves the data start past the
// info block. The device is written only when every byte reads zero, or
// when it holds exactly what a cut-short provisioning of this template
// leaves (a head zero or torn, every other byte zero or the template's);
// the whole gzip template is read and checked (CRC, length against its
// superblock) before anything is written. Anything else is left byte for
// byte, the console says why, and the services run without state.
//
// # Services
//
// The supervisor starts the services in config order, each in its own
// process group, stdin closed, stdout and stderr prefixed with its name on
// the console, environment PATH, a HOME of its own and its own Env (home.go:
// /perm/home/NAME, made 0700 on the state filesystem so what a service
// keeps there survives a reboot; /tmp/home/NAME on the tmpfs when the state
// is not mounted; one the service's Env sets is kept). Restart always,
// on-failure or never; the delay doubles from 100 ms to 30 s and resets
// after a run of 10 s (healthyAfter). WaitFor is dialled every 5 ms; the
// ready mark is posted to the supervisor's goroutine, and only while the
// process still runs. A service with Pool is started through poold, its
// exit status coming back over poold's connection; one with StartAfter
// once its conditions hold (checked every 100 ms on a goroutine of its
// own); one marked Gokrazy gets gokrazy's contract (GOKRAZY_FIRST_START,
// exit status 125, its HOME as working directory, USER=root). The console
// reads poweroff, reboot and start NAME; with a Shell in the config the
// shell owns the console and the same commands come through
// contract.CommandFIFO, written by nvinit's /sbin links.
//
// A failed start (no fork, or a run that failed before healthyAfter, ready
// mark or not) that may be its text's fault (a fault signal at any time,
// or any failure before ready or healthyAfter) has the text checked, once
// per streak: textRepair reads the program's OFF2F header, hashes the
// text in the store against it and, when damaged, rewrites it from the
// clean copy its note's fallback directory names (hashed first: a damaged
// copy is not used, and the console says so) by a new file renamed over it
// between a remount read-write and one read-only. An image's program
// names its copy on the root filesystem (/lib/off2f); a deployed one the
// image's copy when its text is the image's, else the copy the update
// endpoint kept on the state filesystem (update.CleanSubdir under
// /nv/state: nvinit names that directory to the endpoint once the state is
// mounted; without a state a deploy of a text the image lacks is
// refused). After
// maxFailedStarts (8) failed starts in a row the service is left stopped
// with one line naming how the last start ended and its last three lines
// of output.
//
// nvinit's own text is checked by its loader: its note records the text's
// CRC-32C, and a text that does not match it is never run; the loader runs
// the clean copy on the root filesystem instead, prints what it found on
// the console and puts it into nvinit's environment (OFF2F_FALLBACK).
// nvinit reads and unsets it at once (a re-execution or a service must not
// inherit it), and after the store stage logs it and has the store's copy
// of its text checked and repaired by textRepair, as a failed service's;
// what it found is the update endpoint's Features.InitText. It runs before
// the services, because a repair remounts the store, which once they run
// only the supervisor's goroutine does.
//
// A deploy's trial (update.Supervisor.Replace) also runs on the
// supervisor's goroutine: stop the service, switch its program, start it,
// and keep the new program only if it is ready within the deadline,
// otherwise stop it, switch back and start the old one.
//
// # Decisions
//
//   - State is written only when blank or holding this template's cut-short
//     copy, over reformatting a device that does not mount, because the
//     data on it may still be recovered.
//   - As PID 1 a bad config boots with no services over exiting, because a
//     PID 1 that exits panics the kernel and one that waits with a console
//     and a clean shutdown can be looked at; with -host a mistake is an
//     error, because booting would provision the devices the config names.
//   - Services start without waiting for each other's readiness: WaitFor
//     only marks it. A pooled service started before poold listens fails
//     its spawn and is retried after the first backoff step (100 ms).
//   - A service's text is checked after a suspect failure over at every
//     start or boot, because its loader checks only the header page (it
//     cannot afford to hash a text per start) and a check reads the whole
//     text. nvinit's is the exception, checked by its loader's CRC at
//     every boot (docs/OFF2F.md says what that costs), because a damaged
//     PID 1 stops the boot before anything could repair it.
//   - Eight failed starts over restarting for ever: their backoff adds up
//     to 12.7 s, longer than healthyAfter, so what clears by itself at boot
//     has cleared, and what has not (a damaged heap, a missing file, a bad
//     flag) would otherwise restart every 30 s for ever.
//   - A trial allows no failed start: a new program that fails before it
//     is ready is rolled back at once over restarted by the backoff until
//     the deadline, because someone waits for the deploy's answer and the
//     old program should be down as briefly as possible.
//   - The supervisor's clock is injected, so tests check backoff sequences
//     without sleeping; so are the homes' directories (Homes, set as PID 1
//     only), so a test or a run on the build machine makes none.
//   - The clock is only ever set forward at boot, to the time saved on the
//     state or the floor: a board without a real-time clock (a Pi)
//     starts at 1970, where every certificate is not yet valid; a board
//     with one reads later than both and is left alone. The floor is
//     nvboot's (contract.ClockEpoch), a constant of the source, so that
//     every builder writes the same config (contract.ClockEpoch says why).
//     SNTP may step back (a saved time from a clock that ran ahead).
//   - A HOME on the state over one on the tmpfs, because servers keep keys,
//     certificates and settings there (os.UserConfigDir); over HOME=/,
//     which the read-only root made unwritable. Its directory is made at
//     a service's first start of a boot (a stat after the first boot).
//
// # Invariants
//
//   - Every change to a service (start, restart, stop, trial, text repair,
//     a deploy's store step) happens on the supervisor's goroutine.
//   - nvpull runs only with the config's Pull, after the services, with a
//     token new at each boot, and is never among the deployable services
//     (TestWithPuller).
//   - A ready mark never follows its run's exit line nor the supervisor's
//     return, and is never printed for a process that has exited.
//   - No text is read at boot (nvinit's loader reads nvinit's, for its
//     CRC); a text is read whole only after a suspect failure, once per
//     streak of failed starts, or, nvinit's own, after its loader ran the
//     clean copy.
//   - A text file is never written in place: a process still running it
//     maps its blocks (DAX) until it exits; the next start gets the new
//     file. Nothing is written from a clean copy that does not check out.
//   - The text store is read-write only between the two remounts of one
//     step, and never when its device is read-only.
//   - The state device is written only when blank or holding this
//     template's cut-short copy.
//
// # Limits
//
//   - A text still mapped by another process (another service, processes
//     poold parked) makes the remount read-only fail with EBUSY: the store
//     stays read-write until the next boot. Parked processes keep a damaged
//     text until poold replaces them.
//   - A damaged header page is not repaired here: the loader refuses it and
//     maps the fallback copy by itself. A service's text with a damaged
//     header page is not repaired either; nvinit's own is (the loader's
//     variable says why it fell back, whatever the reason).
//   - A dial shows only that something listens (the kernel completes the
//     handshake before the program accepts): a service must listen once it
//     can serve. One that dies within healthyAfter of its ready mark counts
//     as a failed start, and its exit line says so.
//   - After a power cut the saved time is up to 10 minutes old: a Pi
//     without NTP (or before its first answer) starts that far behind.
//   - A given-up service starts again only by a reboot or start NAME on the
//     console.
package nvinit
