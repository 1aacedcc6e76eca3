// Package cpucounter reads the CPU's own free-running counter, the clock a
// guest on the device clock shares with its host's measurer: on amd64 the
// time-stamp counter (RDTSC), on arm64 the generic timer's virtual count
// (CNTVCT_EL0 and its frequency CNTFRQ_EL0, both readable at EL0 as the
// vDSO reads them). Under QEMU's -icount both count the instruction-timed
// guest clock from power-on, which is why nvinit's tsc mark
// (device/bootprof) and the arm64 boot tests' init read them.
//
// # Invariants
//
//   - NS converts a count at any frequency to nanoseconds exactly, without
//     overflow for centuries of ticks: TestNS.
//
// # Limits
//
//   - Read is 0 and Available false on other architectures.
//   - amd64's count is in TSC ticks (nanoseconds only where the TSC runs at
//     1 GHz, as on the device clock); arm64's is converted to nanoseconds.
package cpucounter
