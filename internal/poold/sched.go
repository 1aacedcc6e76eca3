package poold

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"
)

// Scheduling policies (linux/sched.h).
const (
	schedOther = 0
	schedIdle  = 5
)

// Parked processes are prepared with idle CPU: poold forks them from a thread
// running SCHED_IDLE, so they and every thread their runtime starts inherit
// it and never take CPU from requests; once parked, they are put back to
// SCHED_OTHER, before any activation. Leaving SCHED_IDLE needs CAP_SYS_NICE,
// so only a root poold does this.

// startIdle runs fork (a StartProcess) on a thread set to SCHED_IDLE, when
// poold may undo it.
func startIdle(fork func() error) error {
	if os.Geteuid() != 0 {
		return fork()
	}
	runtime.LockOSThread()
	if setSched(0, schedIdle) != nil {
		runtime.UnlockOSThread()
		return fork()
	}
	err := fork()
	if setSched(0, schedOther) == nil {
		runtime.UnlockOSThread()
	} // else the thread stays locked and dies with its goroutine's end
	return err
}

// unidle puts every thread of pid back to SCHED_OTHER; a thread started
// while the first pass ran is caught by the second.
func unidle(pid int) {
	if os.Geteuid() != 0 {
		return
	}
	for range 2 {
		ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			return
		}
		for _, e := range ents {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				setSched(tid, schedOther)
			}
		}
	}
}

func setSched(tid, policy int) error {
	var prio int32
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), uintptr(policy), uintptr(unsafe.Pointer(&prio)))
	if e != 0 {
		return e
	}
	return nil
}
