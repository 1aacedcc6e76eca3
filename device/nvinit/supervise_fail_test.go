package nvinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
)

// drain collects the console lines after Run returned.
func drain(out lines) string {
	close(out)
	var all []string
	for l := range out {
		all = append(all, l)
	}
	return strings.Join(all, "\n")
}

// waitRun waits for Run's result; the timeout only guards against a hang.
func waitRun(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// A service that fails every start is restarted maxFailedStarts-1 times and
// then left stopped, with one line saying which, how its last run ended, its
// last lines and what to do.
func TestSupervisorGivesUpAfterFailedStarts(t *testing.T) {
	clock := newFakeClock()
	script := `echo starting; echo "opening the heap: not a pheap file (bad magic)" >&2; exit 1`
	s := &supervisor{Clock: clock, Poweroff: true,
		Services: []contract.Service{{Name: "kv", Path: "/bin/sh", Args: []string{"-c", script}}}}
	out, _, done := harness(t, s)
	for i := 1; i < maxFailedStarts; i++ {
		out.expect(t, "NVBOOT-MARK service-start kv ")
		out.expect(t, "nvinit: kv exited with status 1")
		clock.expectDelay(t)
		clock.Fire()
	}
	out.expect(t, "NVBOOT-MARK service-start kv ")
	if err := waitRun(t, done); !errors.Is(err, errAllExited) {
		t.Fatalf("Run = %v, want ErrAllExited once kv is given up", err)
	}
	text := drain(out)
	var gaveUp string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "nvinit: kv: not restarting it") {
			gaveUp = l
		}
	}
	for _, want := range []string{
		fmt.Sprintf("%d failed starts in a row", maxFailedStarts),
		"exited with status 1",
		`"starting"`, `"opening the heap: not a pheap file (bad magic)"`,
		"reboot",
	} {
		if !strings.Contains(gaveUp, want) {
			t.Errorf("give-up line %q lacks %q\nconsole:\n%s", gaveUp, want, text)
		}
	}
	if strings.Contains(text, "service-start kv") {
		t.Errorf("kv started again after it was given up:\n%s", text)
	}
	if len(clock.delays) != 0 {
		t.Errorf("a restart was scheduled after the last failed start")
	}
}

// A start that does not even fork counts too: a missing binary stops.
func TestSupervisorGivesUpOnStartErrors(t *testing.T) {
	clock := newFakeClock()
	s := &supervisor{Clock: clock, Poweroff: true, Services: []contract.Service{{Name: "gone", Path: "/nonexistent/prog"}}}
	out, _, done := harness(t, s)
	for i := 1; i < maxFailedStarts; i++ {
		clock.expectDelay(t)
		clock.Fire()
	}
	if err := waitRun(t, done); !errors.Is(err, errAllExited) {
		t.Fatalf("Run = %v, want ErrAllExited", err)
	}
	text := drain(out)
	if !strings.Contains(text, "nvinit: gone: not restarting it") || !strings.Contains(text, "starting /nonexistent/prog") {
		t.Errorf("no give-up line naming the failed start:\n%s", text)
	}
}

// A run that lasted healthyAfter ends the streak: a service that fails now
// and then is restarted as long as it keeps running a while in between.
func TestSupervisorFailedStartsResetAfterHealthyRun(t *testing.T) {
	clock := newFakeClock()
	gate := filepath.Join(t.TempDir(), "gate")
	script := `while [ ! -e "$GATE" ]; do sleep 0.005; done; rm "$GATE"; exit 1`
	s := &supervisor{Clock: clock, Poweroff: true, Env: []string{"GATE=" + gate, "PATH=/usr/bin:/bin"},
		Services: []contract.Service{{Name: "g", Path: "/bin/sh", Args: []string{"-c", script}}}}
	out, _, done := harness(t, s)
	var runs []time.Duration
	for range maxFailedStarts - 1 {
		runs = append(runs, time.Second)
	}
	runs = append(runs, healthyAfter)
	for range maxFailedStarts - 1 {
		runs = append(runs, time.Second)
	}
	for _, ran := range runs {
		out.expect(t, "service-start g")
		clock.Advance(ran)
		os.WriteFile(gate, nil, 0o644)
		clock.expectDelay(t)
		clock.Fire()
	}
	// One more failed start makes maxFailedStarts since the healthy run.
	out.expect(t, "service-start g")
	clock.Advance(time.Second)
	os.WriteFile(gate, nil, 0o644)
	if err := waitRun(t, done); !errors.Is(err, errAllExited) {
		t.Fatalf("Run = %v, want ErrAllExited", err)
	}
	if text := drain(out); strings.Count(text, "not restarting it") != 1 {
		t.Errorf("want one give-up, at the end:\n%s", text)
	}
}

// A service marked ready that dies before healthyAfter failed its start all
// the same (kv listening before it opened its heap): the exit line says the
// mark was premature, and the streak ends in a give-up.
func TestSupervisorReadyThenDeadIsAFailedStart(t *testing.T) {
	clock := newFakeClock()
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	s := &supervisor{Clock: clock, Poweroff: true,
		Services: []contract.Service{helperService(t, "kv", "exit-on-gate", filepath.Join(dir, "sock"), gate)}}
	out, _, done := harness(t, s)
	for i := 1; i <= maxFailedStarts; i++ {
		out.expect(t, "NVBOOT-MARK service-ready kv ")
		os.WriteFile(gate, nil, 0o644)
		if l := out.expect(t, "nvinit: kv exited"); !strings.Contains(l, "after it was marked ready") {
			t.Errorf("exit line %q does not say kv died after its ready mark", l)
		}
		if i < maxFailedStarts {
			clock.expectDelay(t)
			clock.Fire()
		}
	}
	if err := waitRun(t, done); !errors.Is(err, errAllExited) {
		t.Fatalf("Run = %v, want ErrAllExited", err)
	}
	if text := drain(out); !strings.Contains(text, "kv: not restarting it") || !strings.Contains(text, "gate opened; exiting") {
		t.Errorf("no give-up line with kv's last words:\n%s", text)
	}
}

// The ready mark is for a live process: a service that answered the dial
// and exited before the mark was posted gets none.
func TestSupervisorNoReadyMarkForExitedProcess(t *testing.T) {
	dir := t.TempDir()
	pids := make(chan int, 1)
	s := &supervisor{Poweroff: true,
		Services: []contract.Service{helperService(t, "srv", "exit-on-dial", filepath.Join(dir, "sock"), "")}}
	s.Services[0].Restart = contract.RestartNever
	var once sync.Once
	s.afterDial = func() {
		once.Do(func() {
			// The dial made the helper exit: hold the mark back until the
			// process has ended (a zombie or reaped).
			pid := <-pids
			for {
				b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
				if err != nil || procState(b) == 'Z' {
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	// The helper's child keeps the output pipe open a while, as a service's
	// child may: its exit reaches the supervisor late.
	s.Services[0].Env = append(s.Services[0].Env, "HELPER_LINGER=1")
	out, _, done := harness(t, s)
	l := out.expect(t, "srv: up ")
	pid, err := strconv.Atoi(strings.TrimPrefix(l, "srv: up "))
	if err != nil {
		t.Fatalf("helper said %q", l)
	}
	pids <- pid
	if err := waitRun(t, done); !errors.Is(err, errAllExited) {
		t.Fatalf("Run = %v", err)
	}
	text := drain(out)
	if strings.Contains(text, "service-ready srv") {
		t.Errorf("srv marked ready though it had exited:\n%s", text)
	}
	if !strings.Contains(text, "nvinit: srv exited with status 1") {
		t.Errorf("no exit line:\n%s", text)
	}
}

// procState is the state letter of a /proc/PID/stat line.
func procState(stat []byte) byte {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0
	}
	return s[i+2]
}

// fakeTexts is a text store check that answers as told and records what it
// was asked.
type fakeTexts struct {
	mu     sync.Mutex
	asked  []string
	answer textCheck
	err    error
}

func (f *fakeTexts) CheckText(program string) (textCheck, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, program)
	return f.answer, f.err
}

func (f *fakeTexts) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

// A service killed by a fault has its text checked; a damaged one is
// repaired and the console says so before the restart. One check per streak
// of failed starts: a crash loop does not read the text again and again.
func TestSupervisorChecksTextAfterFault(t *testing.T) {
	clock := newFakeClock()
	texts := &fakeTexts{answer: textCheck{Text: "/nv/text/" + hashA, Damage: errors.New("text content hash x does not match the header's y"),
		Repaired: "/lib/off2f/" + hashA}}
	s := &supervisor{Clock: clock, Texts: texts,
		Services: []contract.Service{{Name: "kv", Path: "/bin/sh", Args: []string{"-c", "kill -SEGV $$"}}}}
	out, _, _ := harness(t, s)
	out.expect(t, "nvinit: kv killed by signal 11")
	l := out.expect(t, "nvinit: kv: text ")
	for _, want := range []string{"/nv/text/" + hashA, "damaged", "does not match", "repaired from /lib/off2f/" + hashA} {
		if !strings.Contains(l, want) {
			t.Errorf("repair line %q lacks %q", l, want)
		}
	}
	out.expect(t, "kv: restarting in")
	clock.expectDelay(t)
	clock.Fire()
	out.expect(t, "nvinit: kv killed by signal 11")
	out.expect(t, "kv: restarting in")
	clock.expectDelay(t)
	if got := texts.calls(); len(got) != 1 || got[0] != "/bin/sh" {
		t.Errorf("text checks %q, want one of /bin/sh", got)
	}
}

// Which ends of a run lead to a text check.
func TestSupervisorTextCheckTriggers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  string
		waitFor bool
		ran     time.Duration
		check   bool
	}{
		{"fault at start", "kill -SEGV $$", false, 0, true},
		{"SIGBUS", "kill -BUS $$", false, 0, true},
		{"SIGILL after a long run", "kill -ILL $$", false, time.Hour, true},
		{"failure before ready, however late", "exit 2", true, time.Hour, true},
		{"failure soon after start", "exit 2", false, time.Second, true},
		{"clean exit", "exit 0", false, 0, false},
		{"failure after a healthy run", "exit 1", false, time.Hour, false},
		{"killed by SIGKILL after a healthy run", "kill -KILL $$", false, time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			texts := &fakeTexts{answer: textCheck{Text: "/nv/text/" + hashA}}
			gate := filepath.Join(t.TempDir(), "gate")
			sv := contract.Service{Name: "svc", Path: "/bin/sh", Restart: contract.RestartNever,
				Args: []string{"-c", `while [ ! -e "$GATE" ]; do sleep 0.005; done; ` + tc.script}}
			if tc.waitFor {
				sv.WaitFor = filepath.Join(t.TempDir(), "never")
			}
			s := &supervisor{Clock: clock, Texts: texts, Poweroff: true,
				Env: []string{"GATE=" + gate, "PATH=/usr/bin:/bin"}, Services: []contract.Service{sv}}
			out, _, done := harness(t, s)
			out.expect(t, "service-start svc")
			clock.Advance(tc.ran)
			os.WriteFile(gate, nil, 0o644)
			if err := waitRun(t, done); !errors.Is(err, errAllExited) {
				t.Fatalf("Run = %v", err)
			}
			text := drain(out)
			if got := len(texts.calls()) == 1; got != tc.check {
				t.Errorf("text checked: %v, want %v\n%s", got, tc.check, text)
			}
			if tc.check && !strings.Contains(text, "nvinit: svc: text /nv/text/"+hashA+" is sound") {
				t.Errorf("no line saying the text was checked and sound:\n%s", text)
			}
		})
	}
}

// A check that fails says so, and the service restarts as without one.
func TestSupervisorTextCheckError(t *testing.T) {
	clock := newFakeClock()
	texts := &fakeTexts{answer: textCheck{Text: "/nv/text/" + hashA, Damage: errors.New("missing")},
		err: fmt.Errorf("remounting /nv/text read-write: %w", syscall.EROFS)}
	s := &supervisor{Clock: clock, Texts: texts,
		Services: []contract.Service{{Name: "kv", Path: "/bin/sh", Args: []string{"-c", "kill -SEGV $$"}}}}
	out, _, _ := harness(t, s)
	l := out.expect(t, "nvinit: kv: text ")
	for _, want := range []string{"damaged (missing)", "not repaired", "read-only file system"} {
		if !strings.Contains(l, want) {
			t.Errorf("line %q lacks %q", l, want)
		}
	}
	out.expect(t, "kv: restarting in")
}
