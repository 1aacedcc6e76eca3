// Package guestrun holds what a benchmark needs to run its own measurer in
// a QEMU guest: the -guest flag's plan and the kernel (host/kernel), a
// static build of the benchmark, an fsdax NVDIMM image with an empty ext4,
// the -clock and -cpu-rate flags, and the JSON the guest prints between
// markers on the console. bench/omf, bench/pager, bench/pheap and
// bench/clockcal use it.
//
// # Design
//
//   - The guest measures with its own clock and prints one benchjson.Output
//     line between markers; the host parses it (ParseOutput, unknown fields
//     refused) and hides it from the progress it copies (HideLines).
//   - The device clock by default (Clock, docs/DEVICE-CLOCK.md): time.Now in
//     the guest reads the TSC, which under -icount counts guest nanoseconds,
//     so the figures are a device's and do not follow the host's load.
//     Under the wall clock the omf guest's figures swung 2–4× between runs;
//     on the device clock three runs agreed within 1 %.
//   - AlignedDAX (mkfs.ext4 -E stride=512,stripe_width=512) makes ext4 start
//     large files on 2 MiB of the device, so a DAX fault can map 2 MiB with
//     one PMD entry, as the appliance's bigalloc text store does.
//   - The guest part is planned, not assumed (Plan): -guest auto skips it
//     with the reason when QEMU, a kernel or mkfs.ext4 is missing, or with
//     -quick; the kernel is never built here.
//
// # Invariants
//
//   - The JSON line is found and decoded strictly: TestParseOutput.
//   - -clock and -cpu-rate accept only what QEMU's -icount can do (1e9
//     divided by a power of two): TestClockFlags.
//
// # Limits
//
//   - One guest run per benchmark invocation; the kernel must be built
//     beforehand (make kernel).
package guestrun
