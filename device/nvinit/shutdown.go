package nvinit

import (
	"errors"
	"syscall"
	"time"
)

// defaultGrace is how long services get to exit after SIGTERM.
const defaultGrace = 5 * time.Second

// killWait bounds the wait after SIGKILL: only a process stuck in the kernel
// (D state) survives it, and the machine goes down regardless.
const killWait = 2 * time.Second

// shutdown stops the services: no more restarts, SIGTERM to each process
// group, SIGKILL to what is left after the grace period. Exits keep arriving
// as events and are logged by exited.
func (s *supervisor) shutdown() {
	s.stopping = true
	for _, sv := range s.svcs {
		if sv.stopTimer != nil {
			sv.stopTimer()
			sv.stopTimer = nil
		}
	}
	grace := s.Grace
	if grace == 0 {
		grace = defaultGrace
	}
	s.signalAll(syscall.SIGTERM)
	if s.waitAll(grace) {
		return
	}
	for _, sv := range s.running() {
		s.Console.Logf("%s: still running %v after SIGTERM; sending SIGKILL", sv.Name, grace)
	}
	s.signalAll(syscall.SIGKILL)
	if !s.waitAll(killWait) {
		for _, sv := range s.running() {
			s.Console.Logf("%s: pid %d survives SIGKILL; leaving it", sv.Name, sv.pid)
		}
	}
}

func (s *supervisor) running() []*svc {
	var r []*svc
	for _, sv := range s.svcs {
		if sv.pid != 0 {
			r = append(r, sv)
		}
	}
	return r
}

// signalAll signals each running service's process group (it was started
// as its leader), or the process alone if the group is gone.
func (s *supervisor) signalAll(sig syscall.Signal) {
	for _, sv := range s.running() {
		if err := syscall.Kill(-sv.pid, sig); errors.Is(err, syscall.ESRCH) {
			syscall.Kill(sv.pid, sig)
		}
	}
}

// waitAll handles events until nothing runs or d has passed.
func (s *supervisor) waitAll(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for len(s.running()) > 0 {
		select {
		case f := <-s.events:
			f()
		case <-t.C:
			return false
		}
	}
	return true
}

// unmountAll syncs and takes the nvboot filesystems down before power-off:
// state first (it is written), then the text store. A busy one (a process
// that survived SIGKILL) is detached lazily; the sync already made its
// data durable.
func unmountAll(m mounter, dirs []string, logf func(string, ...any)) {
	syscall.Sync()
	for _, d := range dirs {
		err := m.Unmount(d, 0)
		if errors.Is(err, syscall.EBUSY) {
			err = m.Unmount(d, mntDetach)
		}
		if err != nil && !errors.Is(err, syscall.EINVAL) { // EINVAL: not mounted
			logf("unmounting %s: %v", d, err)
		}
	}
	syscall.Sync()
}
