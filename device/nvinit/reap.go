package nvinit

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// reaper is the one place that waits for children. As PID 1 (All) it waits
// for any child, because every orphan in the system becomes ours and would
// stay a zombie otherwise; exits of the children it started are routed to
// their handlers, the rest to Orphan. Without All (tests, not PID 1) it
// waits only for the pids it registered, so it never steals the exit of a
// child someone else in the process started (os/exec).
type reaper struct {
	All    bool
	Orphan func(pid int, ws syscall.WaitStatus) // nil: dropped

	mu      sync.Mutex
	waiting map[int]func(syscall.WaitStatus)
}

// Start runs start (a fork) under the reaper's lock and registers done for the
// pid it returns, so the child cannot be reaped before its handler exists.
// done runs on the reaper's goroutine, once.
func (r *reaper) Start(start func() (pid int, err error), done func(syscall.WaitStatus)) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := start()
	if err != nil {
		return pid, err
	}
	if r.waiting == nil {
		r.waiting = map[int]func(syscall.WaitStatus){}
	}
	r.waiting[pid] = done
	return pid, nil
}

type reaped struct {
	pid  int
	ws   syscall.WaitStatus
	done func(syscall.WaitStatus)
}

// Reap collects every child that has exited by now and calls its handler.
func (r *reaper) Reap() {
	r.mu.Lock()
	var got []reaped
	if r.All {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
			got = append(got, reaped{pid, ws, r.waiting[pid]})
			delete(r.waiting, pid)
		}
	} else {
		for pid, done := range r.waiting {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.ECHILD) {
				// Reaped elsewhere: report it gone rather than wait forever.
				p, ws = pid, syscall.WaitStatus(0xff00)
			} else if err != nil || p <= 0 {
				continue
			}
			got = append(got, reaped{pid, ws, done})
			delete(r.waiting, pid)
		}
	}
	r.mu.Unlock()
	// Outside the lock: a handler may start the process again.
	for _, g := range got {
		switch {
		case g.done != nil:
			g.done(g.ws)
		case r.Orphan != nil:
			r.Orphan(g.pid, g.ws)
		}
	}
}

// Run reaps on every SIGCHLD until ctx ends. Signals coalesce, so each wake
// collects everything that has exited.
func (r *reaper) Run(ctx context.Context) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	defer signal.Stop(ch)
	r.Reap() // children that exited before Notify
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			r.Reap()
		}
	}
}
