package cpucounter

// Generic returns the generic timer's virtual count (CNTVCT_EL0, after an
// ISB so it is not read early) and its frequency (CNTFRQ_EL0).
func Generic() (count, freq uint64)

// Read is the virtual counter in nanoseconds: under QEMU's -icount it
// counts QEMU_CLOCK_VIRTUAL, the instruction-counted guest clock, from
// power-on (at 62.5 MHz in QEMU 7.2: a 16 ns tick).
func Read() uint64 { return NS(Generic()) }

// Available says Read reads a counter on this architecture.
const Available = true
