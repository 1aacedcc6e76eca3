package bootprof

// readCounter returns the generic timer's virtual count (CNTVCT_EL0, after
// an ISB so it is not read early) and its frequency (CNTFRQ_EL0); Linux
// lets EL0 read both, as its vDSO does.
func readCounter() (count, freq uint64)

// readTSC is, on arm64, the virtual counter in nanoseconds: the tsc mark's
// unit on amd64 under the device clock. Under QEMU's -icount the generic
// timer counts QEMU_CLOCK_VIRTUAL, the instruction-counted guest clock,
// from power-on (at 62.5 MHz in QEMU 7.2: a 16 ns tick).
func readTSC() uint64 { return counterNS(readCounter()) }

const haveTSC = true
