// Package bootprof measures the appliance's boot from inside it: nvinit
// prints its marks through a Marker, ties them to the device clock, times
// a service's first answer, and applies the storage model with
// ApplyDiskLimit. `nvboot measure` reads the marks off the serial console
// (format/bootmark is the format both sides share).
//
// # Marks
//
// A mark is one whole console line, NVBOOT-MARK NAME [ARG] UPTIME_US,
// stamped with CLOCK_BOOTTIME. Three more tie the marks to power-on. Under
// QEMU's -icount (the device clock) the TSC counts nanoseconds of guest time
// since reset, firmware and kernel loading included, but the kernel's own
// clocks (CLOCK_BOOTTIME, the kernel log's) run ahead of it early in the
// boot and differ from each other later. On arm64 the "TSC" is the generic
// timer's virtual counter (CNTVCT_EL0) converted to nanoseconds by its
// frequency (CNTFRQ_EL0): under -icount QEMU 7.2 drives it from the same
// instruction-counted virtual clock (62.5 MHz, a 16 ns tick), from
// power-on, so the marks mean the same on both machines. So
// Marker.Handover prints:
//
//	kernel-handover  the kernel log's time of "Run /sbin/nvinit as init
//	                 process", found in the kernel log (logged even under
//	                 quiet)
//	tsc TICKS        the TSC and CLOCK_BOOTTIME read together
//	kmsg-tsc TICKS   the TSC written into a kernel log record, stamped with
//	                 that record's time
//
// and bootmark.PlaceGuest puts every mark on the TSC through the tie of its
// own clock. With contract.AnswerParam on the command line,
// Marker.FirstAnswer dials the service's port every millisecond (a refused
// connect costs few instructions, and under the device clock every
// instruction of the probe is time taken from the service) and on a
// connect GETs / over loopback; the first answer below 500 is the answered
// mark.
//
// # Profile
//
// Steps records points inside nvinit's stages in memory, a clock read
// each: printing a mark costs console time in the boot it measures.
// Marker.Profile prints them as step marks after the boot is measured,
// then every kernel log record (bootmark.FormatRecord: with initcall_debug
// and `quiet` the kernel keeps its initcall lines in its ring buffer, off
// the console), then the profile-end mark.
//
// # Disk model
//
// With contract.DiskLimitParam on the command line nvinit applies the
// storage model right after the kernel filesystems are mounted, before
// anything reads what the model should charge: ApplyDiskLimit enables the
// io controller in the cgroup2 hierarchy, writes the limits to io.max of
// the cgroup disk-model (the root cgroup has no io.max), shortens the
// disk's blk-throttle window to contract.DiskLimitSlice (12 ms) and moves
// nvinit into disk-model/init. Every process nvinit starts inherits the
// limit, and disk-model itself holds no process: cgroup v2 lets only such a
// cgroup give its children controllers, so a poold pool placed under
// disk-model keeps its memory controller and shares the limit. The
// kernel's blk-throttle holds each request until the guest's own clock
// allows it, so a read the guest computes through costs what the model
// says. nvinit prints the disk-limit mark once it is applied.
//
// # Decisions
//
//   - The handover record looked for in the log's last 4 KiB through
//     syslog(2), one system call, over /dev/kmsg from its start, a system
//     call per record: the record is among the last before init ran, and
//     the scan of every record cost 4 ms of a 1-GIPS boot (nvboot measure
//     -profile; 16 KiB cost 0.3 ms more than 4). The kmsg-tsc record is read from a /dev/kmsg reader opened
//     at the log's end before it is written. /dev/kmsg from the start
//     remains the fallback.
//   - /dev/kmsg read with raw syscalls over an O_NONBLOCK *os.File, because
//     the latter parks in Go's poller at the end of the log instead of
//     returning EAGAIN, which hangs PID 1. Only the record naming nvinit's
//     own argv[0] counts, since in a container /dev/kmsg holds the host's
//     boot.
//   - Marks on the serial console over a magic write to an I/O port, because
//     every board has a serial console.
//   - The first answer timed inside the guest over by the host, because the
//     host's polling would put the emulator's timing into a guest-clock
//     figure.
//   - The disk limited inside the guest over by QEMU's throttle alone,
//     because QEMU's waits on the host's clock while the guest work
//     overlapping them counts only its instructions: with QEMU's throttle
//     alone a 128 MiB direct read in 1 MiB requests cost 0.81-0.85 of the
//     sd profile's time and 1500 direct 4 KiB reads about 0.6 of it; limited
//     inside, 1.09 and 0.99 of it, and bursts after pauses 1.11
//     (TestDiskLimitUnderDeviceClock holds all three within 20 %).
//   - A 12 ms throttle window over the kernel's 100 ms, because the first
//     window after a pause passes a window's worth free, and a boot reads in
//     bursts (at 100 ms bursts after pauses cost 0.02 of the profile); over
//     4 ms, because the kernel rounds each wait up to whole jiffies (1.24 to
//     1.91 of the profile).
//
// # Invariants
//
//   - A mark is one whole line, written by the console's Line, so a
//     service's output never splits it.
//   - The tsc mark's TSC is read right after its uptime: a few hundred
//     instructions apart, under the mark's microsecond resolution.
//   - Nothing is written into /dev/kmsg unless the kernel's record of
//     running nvinit was found there.
//
// # Limits
//
//   - No handover, tsc or kmsg-tsc mark when the kernel's record is not in
//     /dev/kmsg (the ring buffer overflowed, no /dev, a container). The
//     counter (internal/cpucounter) is read on amd64 (RDTSC) and arm64 (CNTVCT_EL0; checked
//     under qemu-user: TestArm64TSCUnderQemuUser); elsewhere there is no
//     tsc mark.
//   - The disk model counts bytes and requests, not a card's latency curve,
//     and the 12 ms window still lets 480 KiB or 18 requests pass free after
//     each pause. Buffered writes are charged by writeback to the root
//     cgroup, so the write limits bind only direct writes. Only the disk the
//     command line names is limited.
package bootprof
