package nvinit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/bootprof"
	"github.com/nvboot/nvboot/device/contract"
)

// clock is the time the supervisor decides backoff by; tests pass a fake so
// they check backoff sequences without sleeping.
type clock interface {
	Now() time.Time
	// AfterFunc calls f after d; stop cancels it if it has not run.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Backoff between restarts: doubling from backoffMin to backoffMax, back to
// backoffMin once a run lasted healthyAfter. A crash loop costs little CPU,
// and a service that ran a while restarts at once after a single failure.
const (
	backoffMin   = 100 * time.Millisecond
	backoffMax   = 30 * time.Second
	healthyAfter = 10 * time.Second
)

// maxFailedStarts is how many failed starts in a row make the supervisor
// stop restarting a service. A start failed when it did not fork, or its run
// failed (a non-zero status or a signal) before it lasted healthyAfter,
// whether or not it was marked ready meanwhile (a service may answer before
// it can serve); a run that lasted healthyAfter ends the streak. Eight
// starts wait 0.1+0.2+...+6.4 = 12.7 s of backoff between them, longer
// than healthyAfter: what clears by itself at boot (a socket or a device
// not there yet, a slow neighbour under TCG) has cleared by then, and what
// has not (a damaged heap, a missing file, a bad flag) would only fill the
// console while the backoff grew to backoffMax, forever.
const maxFailedStarts = 8

// nextBackoff returns the delay after prev (0: the first restart).
func nextBackoff(prev time.Duration) time.Duration {
	if prev <= 0 {
		return backoffMin
	}
	return min(2*prev, backoffMax)
}

// outputLinger bounds the wait for a service's output after it exited.
const outputLinger = 100 * time.Millisecond

// defaultEnv is every service's environment before its own Env.
var defaultEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/"}

// errAllExited is Run's result when Poweroff is set and every service has
// exited for good.
var errAllExited = errors.New("every service has exited and none will restart")

// supervisor starts the services in order and restarts them by policy. All
// its state belongs to the goroutine in Run; everything else (exits from the
// reaper, timers) reaches it as a function on the events channel.
type supervisor struct {
	Services []contract.Service
	Console  *console
	Reaper   *reaper
	Clock    clock         // nil: realClock
	Env      []string      // nil: defaultEnv
	Poll     time.Duration // readiness dial interval; 0: 5 ms
	// Poweroff makes Run return errAllExited once nothing runs or will.
	Poweroff bool
	// Grace is how long services get between SIGTERM and SIGKILL at
	// shutdown; 0: 5 s.
	Grace time.Duration
	// PoolSocket is poold's socket for services with Pool set; empty:
	// pool.DefaultSocket.
	PoolSocket string
	// Texts checks the text of a service that failed; nil: never checked.
	Texts textChecker
	// AllReady is called on Run's goroutine once every supervised service
	// has been marked ready at least once: what an A/B test boot commits
	// on (update.SlotState.AllReady). nil: nothing waits for it.
	AllReady func()
	// Holds checks a StartAfter condition; nil: on this machine
	// (conditionHolds). CondPoll is how often; 0: condPoll.
	Holds    func(cond string) bool
	CondPoll time.Duration
	// Starts names services to start now (the console's start command);
	// nil: none.
	Starts <-chan string
	// Homes are where each service's HOME is made, tried in order
	// (home.go; serviceHomes as PID 1); nil: none is made, HOME is Env's.
	Homes []string

	afterDial func() // tests: runs between a readiness dial and its mark

	events   chan func()
	ran      chan struct{} // closed when Run returns
	svcs     []*svc
	stopping bool
	allReady bool // AllReady was called
}

type svc struct {
	contract.Service
	pid         int // 0: not running
	started     time.Time
	backoff     time.Duration
	stopTimer   func() bool // pending restart
	cancelReady context.CancelFunc
	ready       bool       // this run was marked ready
	out         *tailLines // this run's last lines of output
	failures    int        // failed starts in a row: see maxFailedStarts
	textChecked bool       // the text was checked since the streak began
	trial       *trial     // a deploy in progress (trial.go); nil: none
	everReady   bool       // marked ready at least once since boot
	home        string     // HOME made for it this boot; "": not yet
	waiting     bool       // its first start waits for StartAfter
	startedOnce bool       // a start was made (gokrazy's first start is marked)
}

// Run supervises until ctx ends, then shuts the services down (see
// shutdown.go) and returns nil; or returns errAllExited (Poweroff).
func (s *supervisor) Run(ctx context.Context) error {
	if s.Clock == nil {
		s.Clock = realClock{}
	}
	s.prepare()
	defer close(s.ran)
	for _, sc := range s.Services {
		// A DontStart service is kept: the console's start command
		// starts it.
		sv := &svc{Service: sc}
		s.svcs = append(s.svcs, sv)
		if !sc.DontStart {
			s.startAfter(sv) // startafter.go
		}
	}
	for {
		if s.Poweroff && s.idle() {
			return errAllExited
		}
		select {
		case f := <-s.events:
			f()
		case name := <-s.Starts:
			s.startByName(name) // gokrazy.go
		case <-ctx.Done():
			s.shutdown()
			return nil
		}
	}
}

// prepare makes the channels Run serves; called before Run when another
// goroutine (the update endpoint) may post to it before Run starts.
func (s *supervisor) prepare() {
	if s.events == nil {
		s.events = make(chan func(), 16)
		s.ran = make(chan struct{})
	}
}

// post runs f on Run's goroutine; once Run has returned, never.
func (s *supervisor) post(f func()) {
	select {
	case s.events <- f:
	case <-s.ran:
	}
}

// idle reports whether nothing runs and no restart is pending.
func (s *supervisor) idle() bool {
	for _, sv := range s.svcs {
		if sv.pid != 0 || sv.stopTimer != nil || sv.waiting {
			return false
		}
	}
	return true
}

func (s *supervisor) start(sv *svc) {
	sv.stopTimer = nil
	sv.ready = false
	// Read the clock before the marker: a run lasts from the moment the
	// console says it started.
	sv.started = s.Clock.Now()
	s.Console.Mark("service-start", sv.Name)
	tail := &tailLines{}
	sv.out = tail
	out := s.Console.Prefixed(sv.Name)
	r, w, err := os.Pipe()
	if err != nil {
		s.Console.Logf("%s: starting: %v", sv.Name, err)
		s.failed(sv, fmt.Sprintf("failed starting: %v", err))
		return
	}
	env := s.Env
	if env == nil {
		env = defaultEnv
	}
	attr := &syscall.ProcAttr{
		// The service's own entries replace the base's: a Go program
		// reads the first of two HOME=, so appending was not enough.
		Env: mergeEnv(env, sv.Env),
		// stdin closed; stdout and stderr into the prefixer.
		Files: []uintptr{^uintptr(0), w.Fd(), w.Fd()},
		// Its own process group: shutdown signals the service and whatever
		// it started, and a ^C on the console does not reach it.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	}
	s.setHome(sv, attr) // home.go
	if sv.Gokrazy {
		s.gokrazyStart(sv, attr) // gokrazy.go
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
		io.Copy(io.MultiWriter(out, tail), r)
		r.Close()
		out.Close()
		close(drained)
	}()
	if err != nil {
		s.Console.Logf("%s: starting %s: %v", sv.Name, sv.Path, err)
		s.failed(sv, fmt.Sprintf("failed starting %s: %v", sv.Path, err))
		return
	}
	sv.pid = pid
	if sv.WaitFor == "" {
		// Ready once started: said here, so the mark comes before the
		// service's exit and never after Run returned.
		s.Console.Mark("service-ready", sv.Name)
		sv.ready = true
		sv.cancelReady = func() {}
		s.marked(sv)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	sv.cancelReady = cancel
	go s.waitReady(ctx, sv, pid)
}

// waitReady dials WaitFor until it answers, then marks the service ready
// on Run's goroutine if the process still runs: not when its run ended
// meanwhile (ctx cancelled by exited, also run there: the mark never
// follows the exit line), nor when it has exited and its exit is still on
// the way (a zombie, or reaped while its last output drains).
//
// A dial shows only that something listens (the kernel completes the
// handshake before the program accepts), and nothing nvinit can check
// without knowing the protocol shows more; a service must listen once it
// can serve. One that dies soon after its mark is not trusted for it: the
// run counts as a failed start (see maxFailedStarts) and its exit line says
// it had been marked ready.
func (s *supervisor) waitReady(ctx context.Context, sv *svc, pid int) {
	poll := s.Poll
	if poll == 0 {
		poll = contract.ReadinessPoll
	}
	network, addr := contract.WaitForAddr(sv.WaitFor)
	d := bootprof.BoundDialer(network, time.Second)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if c, err := d.DialContext(ctx, network, addr); err == nil {
			c.Close()
			if s.afterDial != nil {
				s.afterDial()
			}
			s.post(func() {
				if ctx.Err() == nil && processRuns(pid) {
					sv.ready = true
					s.Console.Mark("service-ready", sv.Name)
					s.marked(sv)
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

// marked runs what waits for sv's ready mark: its deploy trial, and the
// boot's wait for every service (AllReady).
func (s *supervisor) marked(sv *svc) {
	if sv.trial != nil {
		s.trialReady(sv)
	}
	sv.everReady = true
	if s.AllReady == nil || s.allReady {
		return
	}
	for _, o := range s.svcs {
		// A DontStart service starts only when asked: the test boot
		// does not wait for it.
		if !o.everReady && !o.DontStart {
			return
		}
	}
	s.allReady = true
	s.AllReady()
}

func (s *supervisor) exited(sv *svc, ws syscall.WaitStatus) {
	ran := s.Clock.Now().Sub(sv.started)
	sv.pid = 0
	sv.cancelReady()
	ok := ws.Exited() && ws.ExitStatus() == 0
	healthy := ran >= healthyAfter
	how := describeExit(ws)
	if !ok && !healthy && sv.ready && sv.WaitFor != "" {
		// Said, because the mark above it on the console looks healthy.
		s.Console.Logf("%s %s after it was marked ready, within %v of its start: a failed start all the same", sv.Name, how, healthyAfter)
	} else {
		s.Console.Logf("%s %s", sv.Name, how)
	}
	if sv.trial != nil && !s.trialExited(sv, how) {
		return
	}
	if s.stopping {
		return
	}
	if sv.Gokrazy && ws.Exited() && ws.ExitStatus() == dontSuperviseStatus {
		s.Console.Logf("%s asked not to be started at boot (gokrazy.DontStartOnBoot): stopped; type start %s on the console to start it", sv.Name, sv.Name)
		return
	}
	if healthy {
		sv.backoff, sv.failures, sv.textChecked = 0, 0, false
	}
	if !ok && !healthy {
		sv.failures++
	}
	if s.Texts != nil && textSuspect(sv, ws, healthy) {
		s.checkText(sv)
	}
	switch sv.RestartOrDefault() {
	case contract.RestartNever:
		return
	case contract.RestartOnFailure:
		if ok {
			return
		}
	}
	if sv.failures >= maxFailedStarts {
		s.giveUp(sv, how, sv.out.last())
		return
	}
	s.scheduleRestart(sv)
}

// failed handles a start that did not fork (how says why): the same backoff
// and count as a crash, so a missing binary does not spin.
func (s *supervisor) failed(sv *svc, how string) {
	if sv.trial != nil && !s.trialStartFailed(sv, how) {
		return
	}
	if sv.RestartOrDefault() == contract.RestartNever || s.stopping {
		return
	}
	if sv.failures++; sv.failures >= maxFailedStarts {
		s.giveUp(sv, how, nil)
		return
	}
	s.scheduleRestart(sv)
}

// giveUp leaves sv stopped after maxFailedStarts failed starts, saying on
// one line which service, how its last start failed, its last lines of
// output and what to do: the line someone at the console acts on.
func (s *supervisor) giveUp(sv *svc, how string, last []string) {
	said := "it printed nothing"
	if len(last) > 0 {
		q := make([]string, len(last))
		for i, l := range last {
			q[i] = strconv.Quote(l)
		}
		said = "its last lines: " + strings.Join(q, " / ")
	}
	s.Console.Logf("%s: not restarting it: %d failed starts in a row (none lasted %v); the last one %s, %s. "+
		"Fix the cause, then reboot (type reboot on this console) to start %s again",
		sv.Name, sv.failures, healthyAfter, how, said, sv.Name)
}

func (s *supervisor) scheduleRestart(sv *svc) {
	sv.backoff = nextBackoff(sv.backoff)
	s.Console.Logf("%s: restarting in %v", sv.Name, sv.backoff)
	sv.stopTimer = s.Clock.AfterFunc(sv.backoff, func() {
		s.post(func() {
			if sv.stopTimer != nil && !s.stopping {
				s.start(sv)
			}
		})
	})
}

// processRuns reports whether pid is a process that has not exited: it
// exists and is not a zombie. Without /proc it trusts kill(2) alone.
func processRuns(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) || !procMounted()
	}
	// "pid (comm) S ...": comm may hold anything, the state follows its
	// last ')'.
	st := string(b)
	i := strings.LastIndexByte(st, ')')
	return i < 0 || i+2 >= len(st) || st[i+2] != 'Z' && st[i+2] != 'X'
}

func procMounted() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// describeExit says how a process ended, for the console log.
func describeExit(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", ws.ExitStatus())
}
