package poold

import (
	"fmt"
	"syscall"
	"unsafe"
)

// rlimitNames maps config names to resources (asm-generic/resource.h).
var rlimitNames = map[string]int{
	"cpu": 0, "fsize": 1, "data": 2, "stack": 3, "core": 4, "nproc": 6,
	"nofile": 7, "memlock": 8, "as": 9,
}

// setRlimits applies limits to a running process (prlimit64).
func setRlimits(pid int, limits map[string]uint64) error {
	for name, v := range limits {
		lim := syscall.Rlimit{Cur: v, Max: v}
		_, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(rlimitNames[name]),
			uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
		if e != 0 {
			return fmt.Errorf("rlimit %s=%d for pid %d: %w", name, v, pid, e)
		}
	}
	return nil
}
