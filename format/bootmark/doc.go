// Package bootmark is the serial-console marker format that nvinit prints at
// each boot stage and nvboot measure reads back, and the placing of a
// boot's marks on a timeline from power-on.
//
//	NVBOOT-MARK <name> [<arg>] <uptime_us>
//
// uptime_us is CLOCK_BOOTTIME in microseconds: time since the kernel
// started, so the host can place the kernel's start on its own clock (the
// line's arrival time minus the uptime) and split power-on-to-service into
// stages. The well-known names are, in boot order: init, kernel-handover,
// mounts, store, state, service-start NAME, service-ready NAME, shutdown;
// disk-limit when nvinit applied the storage model inside the guest.
//
// The kernel-handover mark is stamped with the kernel log's clock instead
// (the time of its "Run /sbin/nvinit as init process" record), which is
// close to the uptime but not the same clock. Three more marks tie both to
// power-on when QEMU counts instructions as time (the device clock,
// docs/DEVICE-CLOCK.md):
//
//	NVBOOT-MARK tsc <ticks> <uptime_us>       the TSC and the uptime, read together
//	NVBOOT-MARK kmsg-tsc <ticks> <log_us>     the TSC written into a kernel log record, and its time
//	NVBOOT-MARK answered <port> <uptime_us>   the first HTTP answer from port, seen in the guest
//
// A profiled boot (nvboot measure -profile) prints, once it is measured,
// the steps nvinit timed inside its stages and the kernel's log, then
// profile-end:
//
//	NVBOOT-MARK step <name> <uptime_us>       a point inside a stage, timed in memory
//	NVBOOT-KMSG <log_us> <text>               a kernel log record (Record), on the log's clock
//	NVBOOT-MARK profile-end <uptime_us>
//
// # Design
//
//   - A line on the serial console over Firecracker's magic write to an I/O
//     port: every board has a serial console, and the line carries the
//     guest's own time.
//   - Place (wall clock): a line reaches the host after the guest stamped
//     it, so arrival minus uptime bounds the kernel's start from above; the
//     smallest bound over the boot's marks is the kernel's start, and each
//     stage is that start plus its uptime. Console latency then affects only
//     the one estimate.
//   - PlaceGuest (device clock): nothing depends on when lines arrived. The
//     guest's CLOCK_BOOTTIME and kernel log clock both run ahead of the TSC
//     early in the boot, so each is tied to the TSC by the mark read with
//     it (tsc, kmsg-tsc); the kernel's start is measured by the VM runner
//     (host/vm's KernelEntry), not derived here.
//   - One package shared by nvinit and the host, in format/: the VM runner
//     only stamps lines, it does not parse them.
//
// # Invariants
//
//   - Format and Parse round-trip: TestRoundTrip. A marker may start
//     anywhere in a line (the kernel can print onto it); a malformed one is
//     no marker, never a panic: TestParse, FuzzParse. The same for kernel
//     log records: TestRecordRoundTrip, FuzzParseRecord.
//   - The timelines: TestPlace, TestPlaceGuest, TestUnstamped.
//
// # Limits
//
//   - Names and arguments are single words (IsWord); the uptime has
//     microsecond resolution.
//   - Under the wall clock without -icount, guest uptimes are host time
//     too, so stages that TCG emulates slowly count at their emulated
//     length.
package bootmark
