package nvinit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// Clock is the time the supervisor decides backoff by; tests pass a fake so
// they check backoff sequences without sleeping.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f after d; stop cancels it if it has not run.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// RealClock is the wall clock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }
func (RealClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Backoff between restarts: doubling from BackoffMin to BackoffMax, back to
// BackoffMin once a run lasted HealthyAfter. A crash loop costs little CPU,
// and a service that ran a while restarts at once after a single failure.
const (
	BackoffMin   = 100 * time.Millisecond
	BackoffMax   = 30 * time.Second
	HealthyAfter = 10 * time.Second
)

// NextBackoff returns the delay after prev (0: the first restart).
func NextBackoff(prev time.Duration) time.Duration {
	if prev <= 0 {
		return BackoffMin
	}
	return min(2*prev, BackoffMax)
}

// outputLinger bounds the wait for a service's output after it exited.
const outputLinger = 100 * time.Millisecond

// DefaultEnv is every service's environment before its own Env.
var DefaultEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/"}

// ErrAllExited is Run's result when Poweroff is set and every service has
// exited for good.
var ErrAllExited = errors.New("every service has exited and none will restart")

// Supervisor starts the services in order and restarts them by policy. All
// its state belongs to the goroutine in Run; everything else (exits from the
// reaper, timers) reaches it as a function on the events channel.
type Supervisor struct {
	Services []Service
	Console  *Console
	Reaper   *Reaper
	Clock    Clock         // nil: RealClock
	Env      []string      // nil: DefaultEnv
	Poll     time.Duration // readiness dial interval; 0: 5 ms
	// Poweroff makes Run return ErrAllExited once nothing runs or will.
	Poweroff bool
	// Grace is how long services get between SIGTERM and SIGKILL at
	// shutdown; 0: 5 s.
	Grace time.Duration
	// PoolSocket is poold's socket for services with Pool set; empty:
	// pool.DefaultSocket.
	PoolSocket string

	events   chan func()
	ran      chan struct{} // closed when Run returns
	svcs     []*svc
	stopping bool
}

type svc struct {
	Service
	pid         int // 0: not running
	started     time.Time
	backoff     time.Duration
	stopTimer   func() bool // pending restart
	cancelReady context.CancelFunc
}

// Run supervises until ctx ends, then shuts the services down (see
// shutdown.go) and returns nil; or returns ErrAllExited (Poweroff).
func (s *Supervisor) Run(ctx context.Context) error {
	if s.Clock == nil {
		s.Clock = RealClock{}
	}
	s.events = make(chan func(), 16)
	s.ran = make(chan struct{})
	defer close(s.ran)
	for _, sc := range s.Services {
		if sc.DontStart {
			continue
		}
		sv := &svc{Service: sc}
		s.svcs = append(s.svcs, sv)
		s.start(sv)
	}
	for {
		if s.Poweroff && s.idle() {
			return ErrAllExited
		}
		select {
		case f := <-s.events:
			f()
		case <-ctx.Done():
			s.shutdown()
			return nil
		}
	}
}

// post runs f on Run's goroutine; once Run has returned, never.
func (s *Supervisor) post(f func()) {
	select {
	case s.events <- f:
	case <-s.ran:
	}
}

// idle reports whether nothing runs and no restart is pending.
func (s *Supervisor) idle() bool {
	for _, sv := range s.svcs {
		if sv.pid != 0 || sv.stopTimer != nil {
			return false
		}
	}
	return true
}

func (s *Supervisor) start(sv *svc) {
	sv.stopTimer = nil
	// Read the clock before the marker: a run lasts from the moment the
	// console says it started.
	sv.started = s.Clock.Now()
	s.Console.Mark("service-start", sv.Name)
	out := s.Console.Prefixed(sv.Name)
	r, w, err := os.Pipe()
	if err != nil {
		s.Console.Logf("%s: starting: %v", sv.Name, err)
		s.failed(sv)
		return
	}
	env := s.Env
	if env == nil {
		env = DefaultEnv
	}
	attr := &syscall.ProcAttr{
		Env: append(append([]string(nil), env...), sv.Env...),
		// stdin closed; stdout and stderr into the prefixer.
		Files: []uintptr{^uintptr(0), w.Fd(), w.Fd()},
		// Its own process group: shutdown signals the service and whatever
		// it started, and a ^C on the console does not reach it.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	}
	argv := append([]string{sv.Path}, sv.Args...)
	drained := make(chan struct{})
	done := func(ws syscall.WaitStatus) {
		go func() {
			// The service's last lines go before its exit status, unless a
			// child it left behind holds the pipe open.
			select {
			case <-drained:
			case <-time.After(outputLinger):
			}
			s.post(func() { s.exited(sv, ws) })
		}()
	}
	var pid int
	if sv.Pool != "" {
		pid, err = s.spawnPooled(sv, argv, attr.Env, w, done) // pool.go
	} else {
		pid, err = s.Reaper.Start(func() (int, error) {
			return syscall.ForkExec(sv.Path, argv, attr)
		}, done)
	}
	w.Close()
	go func() {
		io.Copy(out, r)
		r.Close()
		out.Close()
		close(drained)
	}()
	if err != nil {
		s.Console.Logf("%s: starting %s: %v", sv.Name, sv.Path, err)
		s.failed(sv)
		return
	}
	sv.pid = pid
	if sv.WaitFor == "" {
		// Ready once started: said here, so the mark comes before the
		// service's exit and never after Run returned.
		s.Console.Mark("service-ready", sv.Name)
		sv.cancelReady = func() {}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	sv.cancelReady = cancel
	go s.waitReady(ctx, sv.Name, sv.WaitFor)
}

// waitReady dials WaitFor until it answers, then marks the service ready
// on Run's goroutine, unless its run ended meanwhile (ctx cancelled by
// exited, also run there: the mark never follows the exit).
func (s *Supervisor) waitReady(ctx context.Context, name, waitFor string) {
	poll := s.Poll
	if poll == 0 {
		poll = 5 * time.Millisecond
	}
	network, addr := waitForAddr(waitFor)
	d := net.Dialer{Timeout: time.Second}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if c, err := d.DialContext(ctx, network, addr); err == nil {
			c.Close()
			s.post(func() {
				if ctx.Err() == nil {
					s.Console.Mark("service-ready", name)
				}
			})
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Supervisor) exited(sv *svc, ws syscall.WaitStatus) {
	ran := s.Clock.Now().Sub(sv.started)
	sv.pid = 0
	sv.cancelReady()
	s.Console.Logf("%s %s", sv.Name, describeExit(ws))
	if s.stopping {
		return
	}
	ok := ws.Exited() && ws.ExitStatus() == 0
	if ran >= HealthyAfter {
		sv.backoff = 0
	}
	switch sv.RestartOrDefault() {
	case RestartNever:
		return
	case RestartOnFailure:
		if ok {
			return
		}
	}
	s.scheduleRestart(sv)
}

// failed handles a start that did not fork: the same backoff as a crash, so a
// missing binary does not spin.
func (s *Supervisor) failed(sv *svc) {
	if sv.RestartOrDefault() != RestartNever && !s.stopping {
		s.scheduleRestart(sv)
	}
}

func (s *Supervisor) scheduleRestart(sv *svc) {
	sv.backoff = NextBackoff(sv.backoff)
	s.Console.Logf("%s: restarting in %v", sv.Name, sv.backoff)
	sv.stopTimer = s.Clock.AfterFunc(sv.backoff, func() {
		s.post(func() {
			if sv.stopTimer != nil && !s.stopping {
				s.start(sv)
			}
		})
	})
}

// describeExit says how a process ended, for the console log.
func describeExit(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", ws.ExitStatus())
}
