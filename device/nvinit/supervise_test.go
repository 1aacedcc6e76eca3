package nvinit

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
)

// fakeClock hands every AfterFunc delay to the test, which fires the timers
// and moves time by hand: backoff sequences without sleeping.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	pending []func()
	delays  chan time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1e9, 0), delays: make(chan time.Duration, 100)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	c.pending = append(c.pending, f)
	c.mu.Unlock()
	c.delays <- d
	return func() bool { return true }
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Fire() {
	c.mu.Lock()
	p := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, f := range p {
		f()
	}
}

// lines is a console whose lines arrive on a channel.
type lines chan string

func (l lines) Write(b []byte) (int, error) {
	l <- strings.TrimSuffix(string(b), "\n")
	return len(b), nil
}

// expect reads console lines until one contains want; the timeout only
// guards against a hang.
func (l lines) expect(t *testing.T, want string) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case s := <-l:
			if strings.Contains(s, want) {
				return s
			}
		case <-deadline:
			t.Fatalf("no console line containing %q", want)
		}
	}
}

func (c *fakeClock) expectDelay(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-c.delays:
		return d
	case <-time.After(20 * time.Second):
		t.Fatal("no restart scheduled")
		return 0
	}
}

// harness runs a supervisor with a reaper on its own children.
func harness(t *testing.T, s *supervisor) (lines, context.CancelFunc, chan error) {
	t.Helper()
	out := make(lines, 1000)
	s.Console = &console{W: out}
	s.Reaper = &reaper{}
	ctx, cancel := context.WithCancel(context.Background())
	rctx, rcancel := context.WithCancel(context.Background())
	go s.Reaper.Run(rctx)
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() { done <- s.Run(ctx); close(finished) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(20 * time.Second):
			t.Error("supervisor did not stop")
		}
		rcancel()
	})
	return out, cancel, done
}

func TestNextBackoff(t *testing.T) {
	var got []time.Duration
	d := time.Duration(0)
	for range 12 {
		d = nextBackoff(d)
		got = append(got, d)
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms,
		12800 * ms, 25600 * ms, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("backoff %v, want %v", got, want)
	}
}

func TestSupervisorBackoff(t *testing.T) {
	clock := newFakeClock()
	s := &supervisor{Clock: clock, Services: []contract.Service{{Name: "f", Path: "/bin/false"}}}
	out, _, _ := harness(t, s)
	var got []time.Duration
	// Every restart until the supervisor gives up (see
	// TestSupervisorGivesUpAfterFailedStarts).
	for range maxFailedStarts - 1 {
		out.expect(t, "NVBOOT-MARK service-start f ")
		out.expect(t, "nvinit: f exited with status 1")
		got = append(got, clock.expectDelay(t))
		clock.Fire()
	}
	want := []time.Duration{}
	for d := time.Duration(0); len(want) < maxFailedStarts-1; {
		d = nextBackoff(d)
		want = append(want, d)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
}

func TestSupervisorBackoffResetsAfterHealthyRun(t *testing.T) {
	clock := newFakeClock()
	gate := filepath.Join(t.TempDir(), "gate")
	// Runs until the test opens the gate, then fails: the test decides how
	// long each run lasted on the fake clock.
	script := `while [ ! -e "$GATE" ]; do sleep 0.005; done; rm "$GATE"; exit 1`
	s := &supervisor{Clock: clock, Env: []string{"GATE=" + gate, "PATH=/usr/bin:/bin"},
		Services: []contract.Service{{Name: "g", Path: "/bin/sh", Args: []string{"-c", script}}}}
	out, _, _ := harness(t, s)
	var got []time.Duration
	for _, ran := range []time.Duration{time.Second, time.Second, time.Second, 11 * time.Second, time.Second} {
		out.expect(t, "service-start g")
		clock.Advance(ran)
		os.WriteFile(gate, nil, 0o644)
		got = append(got, clock.expectDelay(t))
		clock.Fire()
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 100 * ms, 200 * ms}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
}

func TestSupervisorPolicies(t *testing.T) {
	clock := newFakeClock()
	s := &supervisor{Clock: clock, Poweroff: true, Services: []contract.Service{
		{Name: "ok", Path: "/bin/true", Restart: contract.RestartOnFailure},
		{Name: "bad", Path: "/bin/false", Restart: contract.RestartNever},
		{Name: "sig", Path: "/bin/sh", Args: []string{"-c", "kill -9 $$"}, Restart: contract.RestartNever},
		{Name: "off", Path: "/bin/false", DontStart: true},
		{Name: "out", Path: "/bin/sh", Args: []string{"-c", "echo hello; echo oops >&2"}, Restart: contract.RestartNever},
	}}
	out, _, done := harness(t, s)
	select {
	case err := <-done:
		if err != errAllExited {
			t.Fatalf("Run = %v, want ErrAllExited", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return with every service exited")
	}
	close(out)
	var all []string
	for l := range out {
		all = append(all, l)
	}
	text := strings.Join(all, "\n")
	for _, want := range []string{
		"nvinit: ok exited with status 0",
		"nvinit: bad exited with status 1",
		"nvinit: sig killed by signal 9 (killed)",
		"out: hello", "out: oops",
		"NVBOOT-MARK service-ready ok ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("console lacks %q:\n%s", want, text)
		}
	}
	for _, bad := range []string{"restarting", "service-start off"} {
		if strings.Contains(text, bad) {
			t.Errorf("console has %q:\n%s", bad, text)
		}
	}
	if len(clock.delays) != 0 {
		t.Error("a restart was scheduled")
	}
}

func TestSupervisorStartFailureBacksOff(t *testing.T) {
	clock := newFakeClock()
	s := &supervisor{Clock: clock, Services: []contract.Service{{Name: "gone", Path: "/nonexistent/prog"}}}
	out, _, _ := harness(t, s)
	out.expect(t, "nvinit: gone: starting /nonexistent/prog:")
	if d := clock.expectDelay(t); d != backoffMin {
		t.Errorf("first delay %v", d)
	}
	clock.Fire()
	out.expect(t, "service-start gone")
	if d := clock.expectDelay(t); d != 2*backoffMin {
		t.Errorf("second delay %v", d)
	}
}

func TestSupervisorReadiness(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			addr := filepath.Join(t.TempDir(), "sock")
			if network == "tcp" {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				addr = l.Addr().String()
				l.Close() // free again: the service is not ready yet
			}
			s := &supervisor{Services: []contract.Service{{Name: "srv", Path: "/bin/sleep", Args: []string{"30"}, WaitFor: addr}}}
			out, _, _ := harness(t, s)
			out.expect(t, "service-start srv")
			time.Sleep(50 * time.Millisecond) // a few failed polls
			select {
			case l := <-out:
				t.Fatalf("console %q before anything listens", l)
			default:
			}
			l, err := net.Listen(network, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			out.expect(t, "NVBOOT-MARK service-ready srv ")
		})
	}
}

func TestShutdownTermThenKill(t *testing.T) {
	s := &supervisor{Grace: 200 * time.Millisecond, Services: []contract.Service{
		{Name: "polite", Path: "/bin/sh", Args: []string{"-c", `trap 'echo got TERM; exit 3' TERM; echo up $$; while :; do sleep 0.01; done`}},
		{Name: "stubborn", Path: "/bin/sh", Args: []string{"-c", `trap '' TERM; echo up $$; while :; do sleep 0.01; done`}},
	}}
	out, cancel, done := harness(t, s)
	pids := map[string]int{}
	for len(pids) < 2 { // in either order
		var name string
		var pid int
		fmt.Sscanf(strings.Replace(out.expect(t, ": up "), ":", "", 1), "%s up %d", &name, &pid)
		pids[name] = pid
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	close(out)
	var text []string
	for l := range out {
		text = append(text, l)
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{
		"polite: got TERM", "nvinit: polite exited with status 3",
		"nvinit: stubborn: still running 200ms after SIGTERM; sending SIGKILL",
		"nvinit: stubborn killed by signal 9 (killed)",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("console lacks %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "restarting") {
		t.Errorf("a service was restarted during shutdown:\n%s", all)
	}
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Errorf("%s (pid %d) still exists: %v", name, pid, err)
		}
	}
}

// AllReady fires once, when the last service is first marked ready, and
// not again when one restarts and is marked ready anew.
func TestSupervisorAllReady(t *testing.T) {
	dir := t.TempDir()
	fired := make(chan struct{}, 4)
	s := &supervisor{Services: []contract.Service{
		helperService(t, "one", "serve", filepath.Join(dir, "one"), ""),
		{Name: "two", Path: "/bin/sh", Args: []string{"-c", "sleep 0.2; exit 1"}, Restart: contract.RestartAlways},
	}, AllReady: func() { fired <- struct{}{} }}
	out, _, _ := harness(t, s)
	out.expect(t, "service-ready one")
	out.expect(t, "restarting in") // two, ready at start, then restarted
	out.expect(t, "service-ready two")
	if n := len(fired); n != 1 {
		t.Errorf("AllReady called %d times, want once", n)
	}
}
