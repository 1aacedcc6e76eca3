package bootprof

// readTSC returns the CPU's time-stamp counter (RDTSC).
func readTSC() uint64

const haveTSC = true
