package nvinit

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
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
	s     *Supervisor
	p     *Programs
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
	f.p = &Programs{Store: TextStore{Device: "pmem0", Dir: filepath.Join(dir, "text")}, Mounter: f.m}
	sv := helperService(t, "srv", "serve", filepath.Join(dir, "sock"), "")
	f.old = sv.Path
	f.s = &Supervisor{Services: []Service{sv}, Clock: f.clock}
	f.out, _, _ = harness(t, f.s)
	f.out.expect(t, "service-ready srv")
	return f
}

// try deploys program to srv as the update endpoint does.
func (f *trialFixture) try(program string) TrialResult {
	name := "srv"
	return f.s.Replace(name, contract.DefaultReadyDeadline, TrialOps{
		Path:   f.p.Link(name),
		Switch: func() error { return f.p.Switch(name, program, f.p.Current(name, f.old)) },
		Keep:   func() error { return f.p.Keep(name) },
		Revert: func() error { return f.p.Revert(name) },
	})
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
			res := make(chan TrialResult, 1)
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
		r := f.s.Replace(name, contract.DefaultReadyDeadline, TrialOps{})
		if r.Err == nil || !strings.Contains(r.Err.Error(), "no service") {
			t.Errorf("Replace(%q) = %+v, want refused", name, r)
		}
	}
	if f.m.log() != "" {
		t.Errorf("a refused trial remounted the store: %s", f.m.log())
	}
}

func TestProgramsRecover(t *testing.T) {
	dir := t.TempDir()
	m := &lockedMounter{}
	p := &Programs{Store: TextStore{Device: "pmem0", Dir: dir}, Mounter: m}
	if back, err := p.Recover(); err != nil || back != nil || m.log() != "" {
		t.Fatalf("Recover with no services dir: %v %v, mounts %q: want nothing done", back, err, m.log())
	}
	// A power cut after the switch: the new link and the trial link.
	if err := p.Switch("kv", "/nv/text/programs/new", "/bin/kv"); err != nil {
		t.Fatal(err)
	}
	if got := p.Current("kv", "/bin/kv"); got != "/nv/text/programs/new" {
		t.Fatalf("Current after Switch = %q", got)
	}
	if _, err := p.GC(); err == nil || !strings.Contains(err.Error(), "on trial") {
		t.Errorf("gc during a trial: %v, want refused", err)
	}
	back, err := p.Recover()
	if err != nil || len(back) != 1 || back[0] != "kv" {
		t.Fatalf("Recover = %v, %v; want kv switched back", back, err)
	}
	if got := p.Current("kv", "/bin/kv"); got != "/bin/kv" {
		t.Errorf("Current after Recover = %q, want the old program", got)
	}
	if _, err := os.Lstat(p.Link("kv") + contract.TrialSuffix); !os.IsNotExist(err) {
		t.Errorf("the trial link is still there: %v", err)
	}
	// A kept program is not undone.
	p.Switch("kv", "/nv/text/programs/new", "/bin/kv")
	p.Keep("kv")
	if back, err := p.Recover(); err != nil || back != nil {
		t.Errorf("Recover after Keep = %v, %v; want nothing", back, err)
	}
	if got := p.Current("kv", "/bin/kv"); got != "/nv/text/programs/new" {
		t.Errorf("Current after Keep and Recover = %q", got)
	}
}
