package cpucounter

// Read returns the time-stamp counter (RDTSC).
func Read() uint64

// Available says Read reads a counter on this architecture.
const Available = true
