package poold

import (
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// Scheduling policies (linux/sched.h).
const (
	schedOther = 0
	schedIdle  = 5
)

// Parked processes are prepared with idle CPU: right after poold forked and
// exec'd one, every thread of it is set to SCHED_IDLE, so its runtime start
// and prefault never take CPU from requests; once parked, it is put back to
// SCHED_OTHER, before any activation. Leaving SCHED_IDLE needs
// CAP_SYS_NICE, so only a root poold does this.
//
// The fork itself runs at poold's normal policy. Forking from a poold
// thread set to SCHED_IDLE starves that thread under load while it holds
// one of the Go runtime's Ps and syscall.ForkLock: requests queue behind
// it, and a miss's direct start waits for the lock, for as long as other
// work keeps the CPUs busy.

// startIdle runs fork (a StartProcess) and demotes the child it started.
func startIdle(fork func() (int, error)) error {
	pid, err := fork()
	if err == nil && os.Geteuid() == 0 {
		setAll(pid, schedIdle)
	}
	return err
}

// unidle puts every thread of pid back to SCHED_OTHER.
func unidle(pid int) {
	if os.Geteuid() == 0 {
		setAll(pid, schedOther)
	}
}

// setAll sets policy on every thread of pid; a thread started while the
// first pass ran (from a thread not yet set) is caught by the second, and
// one started later inherits the policy from the thread that started it.
func setAll(pid, policy int) {
	for range 2 {
		ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			return
		}
		for _, e := range ents {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				setSched(tid, policy)
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
