//go:build !amd64 && !arm64

package cpucounter

// Read is 0: no counter is read on this architecture.
func Read() uint64 { return 0 }

// Available says Read reads a counter on this architecture.
const Available = false
