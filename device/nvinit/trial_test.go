package nvinit

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/update"
)

// lockedMounter records mounts from any goroutine and does nothing.
type lockedMounter struct {
	mu    sync.Mutex
	calls []string
	fail  error
}

func (m *lockedMounter) Mount(source, target, fstype string, flags uintptr, data string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ro := "rw"
	if flags&msRdonly != 0 {
		ro = "ro"
	}
	m.calls = append(m.calls, "remount "+ro)
	return m.fail
}

func (m *lockedMounter) Unmount(string, int) error { return nil }

func (m *lockedMounter) log() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.calls, ",")
}

// script writes an executable shell script into dir.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// trialFixture is a supervised service "srv" (the test binary serving on a
// unix socket, its WaitFor) with a text store directory for its links.
type trialFixture struct {
	s     *supervisor
	p     *update.Programs
	m     *lockedMounter
	out   lines
	clock *fakeClock
	dir   string
	old   string // srv's program as built
}

func newTrialFixture(t *testing.T) *trialFixture {
	t.Helper()
	dir := t.TempDir()
	f := &trialFixture{dir: dir, m: &lockedMounter{}, clock: newFakeClock()}
	f.p = &update.Programs{Store: contract.TextStore{Device: "pmem0", Dir: filepath.Join(dir, "text")}, Mounter: f.m,
		CleanDir: update.CleanDirIn(filepath.Join(dir, "state")), ImageFallback: filepath.Join(dir, "lib", "off2f")}
	sv := helperService(t, "srv", "serve", filepath.Join(dir, "sock"), "")
	f.old = sv.Path
	f.s = &supervisor{Services: []contract.Service{sv}, Clock: f.clock}
	f.out, _, _ = harness(t, f.s)
	f.out.expect(t, "service-ready srv")
	return f
}

// try deploys program to srv as the update endpoint does.
func (f *trialFixture) try(program string) update.TrialResult {
	return f.s.Replace("srv", contract.DefaultReadyDeadline, f.p.Trial("srv", program, f.p.Current("srv", f.old)))
}

// links says what services/ holds: "srv -> X" and "srv.trial -> Y".
func (f *trialFixture) links(t *testing.T) string {
	t.Helper()
	des, _ := os.ReadDir(filepath.Dir(f.p.Link("srv")))
	var l []string
	for _, de := range des {
		target, err := os.Readlink(filepath.Join(filepath.Dir(f.p.Link("srv")), de.Name()))
		if err != nil {
			t.Fatalf("%s: %v", de.Name(), err)
		}
		l = append(l, de.Name()+" -> "+filepath.Base(target))
	}
	return strings.Join(l, "; ")
}

func TestSupervisorTrialKeepsAReadyProgram(t *testing.T) {
	f := newTrialFixture(t)
	exe, _ := os.Executable()
	v2 := script(t, f.dir, "v2", "echo version 2; exec "+exe)
	r := f.try(v2)
	if r.Err != nil || r.Result != contract.DeployKept {
		t.Fatalf("trial: %+v", r)
	}
	f.out.expect(t, "srv: version 2")
	if got, want := f.links(t), "srv -> v2"; got != want {
		t.Errorf("links after keeping: %q, want %q (the trial link gone)", got, want)
	}
	// Each step in its own read-write window, read-only after each.
	if got, want := f.m.log(), "remount rw,remount ro,remount rw,remount ro"; got != want {
		t.Errorf("remounts: %s, want %s", got, want)
	}
	// Deployed again, the service goes on from the same link.
	v3 := script(t, f.dir, "v3", "echo version 3; exec "+exe)
	if r := f.try(v3); r.Result != contract.DeployKept {
		t.Fatalf("second trial: %+v", r)
	}
	f.out.expect(t, "srv: version 3")
	if got, want := f.links(t), "srv -> v3"; got != want {
		t.Errorf("links: %q, want %q", got, want)
	}
}

func TestSupervisorTrialRollsBack(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		fire       bool // the deadline passes
		reason     string
	}{
		{name: "exits at start", body: "echo broken; exit 1", reason: "the new program exited with status 1 before it was ready"},
		{name: "never ready", body: "exec sleep 1000", fire: true, reason: "not ready within 30s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTrialFixture(t)
			bad := script(t, f.dir, "bad", tc.body)
			res := make(chan update.TrialResult, 1)
			go func() { res <- f.try(bad) }()
			if tc.fire {
				// The stop's SIGKILL timer, then the new program's deadline.
				for d := range f.clock.delays {
					if d == contract.DefaultReadyDeadline {
						break
					}
				}
				f.clock.Advance(contract.DefaultReadyDeadline)
				f.clock.Fire()
			}
			r := <-res
			if r.Err != nil || r.Result != contract.DeployRolledBack || !strings.Contains(r.Reason, tc.reason) {
				t.Fatalf("trial: %+v, want rolled back because %q", r, tc.reason)
			}
			f.out.expect(t, "switching back to the old program")
			f.out.expect(t, "service-ready srv")
			if got, want := f.links(t), "srv -> "+filepath.Base(f.old); got != want {
				t.Errorf("links after the rollback: %q, want %q", got, want)
			}
		})
	}
}

func TestSupervisorTrialRefused(t *testing.T) {
	f := newTrialFixture(t)
	for _, name := range []string{"nosuch"} {
		r := f.s.Replace(name, contract.DefaultReadyDeadline, update.TrialOps{})
		if r.Err == nil || !strings.Contains(r.Err.Error(), "no service") {
			t.Errorf("Replace(%q) = %+v, want refused", name, r)
		}
	}
	if f.m.log() != "" {
		t.Errorf("a refused trial remounted the store: %s", f.m.log())
	}
}
