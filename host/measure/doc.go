// Package measure is the boot-time measuring engine: it builds an appliance
// image per layout, cold-boots each in QEMU a number of times, turns the
// serial boot markers into the time of every stage since power-on, and sums
// the runs up into statistics, ratios, a table, the JSON object of
// `nvboot measure -json` and a boot chart; and what N appliances of one
// image cost the host's memory (RunDensity). The nvboot CLI's measure verb
// and bench/bigapp call it; they parse flags, it measures.
//
// # The boots
//
// Run builds each layout, boots it once untimed and powers it off cleanly
// (the first boot of a device: the service creates its state), then boots
// each layout Runs times, interleaved, every round starting one layout
// further on, so that no layout always boots first. Every measured boot
// starts from a fresh copy of the pmem the first boot left, on the same
// storage model, and ends at the first HTTP answer of the image's first
// service with a ForwardPort. Machine says on what: the accelerator and clock, the
// board (QEMU's pc or microvm) and how the pmem reaches it (e820 regions,
// NVDIMMs, virtio-pmem), which the JSON's env records (board only when it
// is microvm; acpi "off" on the pc board with e820 or virtio-pmem,
// "hardware-reduced" on microvm).
//
// # The marks
//
// A boot's stages (Stages, in boot order) are times since power-on:
//
//   - loaded: the firmware's read of the kernel (and initramfs), modeled,
//     since QEMU loads them from host files: from the kernel region on pmem
//     at appliance.PmemReadBPS when the region holds the image's kernel,
//     else at the storage model's read bandwidth. Every later stage is
//     shifted by it.
//   - kernel: the firmware hands over to the kernel.
//   - handover, init, store, state: nvinit's serial marks (format/bootmark):
//     the kernel runs init, nvinit's main, the text store mounted (or the
//     fallback chosen), the state filesystem mounted.
//   - ready: the service accepts connections (its WaitFor).
//   - service: the first request is answered.
//
// # The clocks
//
// On the device clock (Machine.Clock vm.ClockDevice: QEMU TCG with its
// instruction counter, CPURate instructions per second of guest time) every
// stage is read from the guest's own clock (bootmark.PlaceGuest): nvinit
// times the first answer from inside (nvboot.answer=PORT), the host's own
// request only confirms it, and kernel comes from a separate boot of the
// kernel whose first instruction reports the guest's clock (vm.KernelEntry).
// The result is the same on any host, however busy. On the wall clock
// (vm.ClockWall) the host times the answer and places the guest's marks by
// their arrival (bootmark.Place); it is faithful only where the guest runs
// at hardware speed (KVM).
//
// # The figures
//
// Results are the median, min and max of each stage and span over the runs
// ("<layout>.<stage>", ms, to 0.1 ms); the spans are power_on_to_service
// and init_to_service (handover to service: what init and the services
// cost). Ratios compare off2f's median with every other layout's for both
// spans ("<span>.off2f_vs_<layout>", the dash of the layout dropped), and
// spread_max is the reproducibility figure: the largest (max - min) /
// median of any stage of any layout, stages under 1 ms left out.
//
// # The chart
//
// Chart draws, per layout, one boot: the median by power-on to service
// (MedianBoot), not the medians of the stages taken one by one, which need
// not be in order (ready and service can come either way round: nvinit
// polls readiness every 5 ms and the answer every 1 ms). Its stages are
// drawn in the order that boot's marks came, each a bar from the mark
// before, on a millisecond axis shared by every layout.
//
// # The profile
//
// With Options.Profile each layout boots once more after the measured
// boots, ProfileCmdline on its command line: initcall_debug (the console
// stays quiet; the kernel keeps the lines in its log) and nvboot.profile=1,
// for which nvinit prints, once the boot is measured, its kernel log and
// the steps it timed inside its stages (device/bootprof). parseProfile
// makes of that one boot: the kernel's phases (the firmware, entry to the
// log's clock, setup to the first initcall, the initcalls, the root mount
// and freed init memory to the handover; the log's times are put on the
// TSC through the kmsg-tsc tie, and the log's clock lags the TSC a little
// until the kernel switches to it, so the first phase errs long), its
// initcalls and driver probes
// by duration, named from the System.map beside the kernel when it has no
// kallsyms, and nvinit's marks and steps with the time since the one
// before; ProfileCost compares that boot with the measured ones' medians:
// what the profile itself costs, since the log's lines cost instructions.
// An initcall's duration is the kernel's own figure once it has switched
// to the TSC clocksource; before, the kernel times it in whole ticks, and
// the log's stamps around it are taken instead. Probes run asynchronously
// (libnvdimm's), so an initcall that waits for them, or that they preempt,
// counts their time too. The chart draws the longest under the kernel →
// handover bar.
//
// # Density
//
// RunDensity (nvboot measure -density) measures what many appliances of one
// image cost the host's memory. Each layout's image boots once to create
// its state; then for every N it starts N guests of it (staggered, each
// once the one before has answered, and as a burst, all at once), every
// one mapping the image's text store from one host file, read-only
// (appliance.BootOptions.SharedText), with a copy of that state of its
// own, and waits for each one's first answer. Settle later it reads the
// host's memory (hostmem.go): each QEMU's Pss less its share of the
// shared files' mappings, plus the pages of the files every guest uses
// (text store, disk, kernel) that the host keeps for them, counted once:
// what mincore(2) finds resident once the host has dropped every clean
// page no process maps (read-ahead, and the disk's pages, which a guest
// caches in its own RAM); what was cached before that drop is reported
// beside it (shared_cached_mib), and so is the sum of the QEMUs' Pss of
// the store's mappings (shared_mapped_mib: the kernel keeps a large folio
// whole while any page of it is mapped, so the host keeps more than the
// guests map). Each guest runs as a shared-text guest does: free page
// reporting, its RAM in 4 KiB pages, under TCG a translation cache of
// DensityOptions.TCGCacheMiB. Each QEMU's TCG translation cache (the
// anonymous executable mapping), its guest's RAM (the mapping of the RAM's
// size, anonymous or memfd) and the rest (vmm_mib) are reported too. Host
// memory per appliance is that sum over N; the ratios
// density_N.off2f_vs_<layout> compare off2f's with each layout's, .no_tcg
// without the translation caches, which a KVM host has not, and .guest the
// guests' RAM and the shared files alone, the part the image's layout
// decides.
// It runs on the wall clock, its pmem as NVDIMMs (the one transport that
// tells a guest a region is read-only); the times to the first answer
// under TCG with N guests on a few host cores are a figure of the host's
// load, and are reported as that. DensityReport has the table, the
// benchjson output and the chart (memory per appliance against N).
//
// # Limits
//
// The firmware's read of the kernel is a model, not a measurement. On the
// device clock the throttled disk's waits pass on the host's clock while the
// guest's time counts instructions, so a busy host stretches them; the
// spread figure shows it. A boot that does not reach its first answer
// within three minutes fails the run. A density run's memory is this
// host's QEMU's under TCG (its cache and own memory, about 40 MiB a guest,
// more than the big appliance's off2f guest's RAM); its kept page cache depends on the host's page cache (large
// folios, read-ahead): the env records the read_ahead_kb of the work
// directory's disk.
package measure
