// Package mono reads CLOCK_MONOTONIC, which is the same clock in every
// process of the machine: a child's reading minus its parent's is the time
// between them.
package mono

import (
	"syscall"
	"unsafe"
)

// Now returns CLOCK_MONOTONIC in nanoseconds.
func Now() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
