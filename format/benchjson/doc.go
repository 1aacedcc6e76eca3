// Package benchjson holds what every benchmark's -json output shares: one
// object {"bench", "env", "ratios", "results"}, where each result is a
// figure's median, min, max and number of runs, and how a figure is summed
// up from its runs. bench/omf, bench/pager, bench/pheap and bench/clockcal
// print Output; the other benchmarks and nvboot measure print the same four
// fields with more of their own. docs/BENCHMARKS.md quotes the figures and
// docs/results/ keeps the raw JSON.
//
// # Design
//
//   - Ratios of medians measured side by side in one run, over absolute
//     times: on a shared machine, and under TCG, absolute times are noisy;
//     only the side-by-side ratios carry weight.
//   - The median over the mean, with min and max beside it, so one disturbed
//     run does not move the figure and the spread stays visible.
//   - A benchmark that measures on the host and in a guest reports the
//     guest's ratios under the names its target is stated in (the device is
//     what the targets are about) and keeps the host's as host_*
//     (AdoptGuestRatios).
//   - env records how the figures were taken (the clock, the CPU rate, the
//     storage model), so a reader can tell runs apart; a measurer adds the
//     system's own (AddSystem: kernel, clock source, THP) and the mount its
//     files were on (MountOf), on the host and in a guest alike.
//
// # Invariants
//
//   - Stats gives the median (the mean of the middle two for an even count),
//     min, max and count, and leaves its input unsorted: TestStats.
//   - AdoptGuestRatios keeps every host ratio under host_* and takes every
//     guest ratio: TestAdoptGuestRatios.
//   - MountOf picks the longest mount point holding the directory, never a
//     sibling sharing its prefix: TestMountIn.
//
// # Limits
//
//   - Only the summary is kept, not the per-run values.
package benchjson
