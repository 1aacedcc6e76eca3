package poold

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/pool"
)

// buildReuseChild builds testdata/reusechild, a program that calls
// pool.Reusable (the test binary cannot: its main.main is the test runner's,
// which exits after TestMain).
func buildReuseChild(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain to build testdata/reusechild")
	}
	bin := filepath.Join(t.TempDir(), "reusechild")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/reusechild")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building reusechild: %v\n%s", err, out)
	}
	return bin
}

// reuseLine is what reusechild writes on stderr.
type reuseLine struct{ pid, activation, fds int }

func parseReuseLine(t *testing.T, s string) reuseLine {
	t.Helper()
	var l reuseLine
	if _, err := fmt.Sscanf(s, "pid=%d activation=%d fds=%d\n", &l.pid, &l.activation, &l.fds); err != nil {
		t.Fatalf("reusechild stderr %q: %v", s, err)
	}
	return l
}

func execBin(bin string) startFunc {
	return func(t *testing.T, argv, env []string, dir string, files []*os.File) (syscall.WaitStatus, bool) {
		cmd := &exec.Cmd{Path: bin, Args: argv, Env: env, Dir: dir,
			Stdin: files[0], Stdout: files[1], Stderr: files[2], ExtraFiles: files[3:]}
		cmd.Run()
		return cmd.ProcessState.Sys().(syscall.WaitStatus), false
	}
}

// TestReuseFidelity: every activation of a reused process sees the argv,
// env, cwd, descriptors, flags and exit status of a freshly exec'd one; the
// same process serves them while main returns; os.Exit, a signal or a
// closed stdout end it, and the next spawn gets a new process; nothing
// leaks across reuses (descriptors in the process, zombies in poold).
func TestReuseFidelity(t *testing.T) {
	bin := buildReuseChild(t)
	prog := contract.Program{Name: "reuse", Path: bin, MinIdle: 1, MaxIdle: 2, MaxUses: 100,
		Allow: []string{"uid:0", fmt.Sprintf("uid:%d", os.Getuid())}}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	srv.Fill()
	dir := t.TempDir()
	const (
		same = iota // served by the process that served the last spawn
		next        // by a new process: the last one exited
	)
	var last reuseLine
	for i, tc := range []struct {
		name  string
		argv  []string
		env   []string
		extra int
		proc  int
	}{
		{"first", []string{"handler", "a", "b c", ""}, []string{"A=1", "B=two words"}, 0, next},
		{"flags", []string{"/usr/bin/handler", "-greet=hello", "rest", "-x"}, []string{"LANG=C"}, 0, same},
		{"flags back to defaults", []string{"h"}, nil, 0, same},
		{"many descriptors", []string{"h"}, []string{"X=y"}, 20, same},
		{"few descriptors again", []string{"h"}, nil, 0, same},
		{"the most descriptors", []string{"h"}, nil, pool.MaxFiles - 4, same},
		{"os.Exit 3", []string{"h"}, []string{"EXIT_CODE=3"}, 0, same},
		{"after os.Exit", []string{"h"}, nil, 0, next},
		{"os.Exit 0", []string{"h"}, []string{"EXIT_CODE=0"}, 0, same},
		{"after os.Exit 0", []string{"h"}, nil, 0, next},
		{"signal", []string{"h"}, []string{"EXIT_SIGNAL=15"}, 0, same},
		{"after signal", []string{"h"}, nil, 0, next},
		{"closes stdout", []string{"h"}, []string{"CLOSE_STDOUT=1"}, 0, same},
		{"after closed stdout", []string{"h", "ü=ß"}, []string{"K=v=w", "EMPTY="}, 0, next},
		{"reused after all", []string{"h"}, nil, 0, same},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Never nil: os/exec would pass its own environment.
			env := append([]string{"CASE=" + tc.name}, tc.env...)
			want := runChild(t, execBin(bin), tc.argv, env, dir, tc.extra)
			got := runChild(t, poolStartName(sock, "reuse"), tc.argv, env, dir, tc.extra)
			srv.Fill() // a process that exited is replaced before the next case
			if !got.hit {
				t.Errorf("spawn missed")
			}
			if !reflect.DeepEqual(got.rep, want.rep) {
				t.Errorf("pooled child saw\n%+v\nexec'd child saw\n%+v", got.rep, want.rep)
			}
			if got.status != want.status {
				t.Errorf("wait status: pooled %#x, exec'd %#x", got.status, want.status)
			}
			if got.fd3 != "fd3 here" || want.fd3 != got.fd3 {
				t.Errorf("fd 3: pooled %q, exec'd %q", got.fd3, want.fd3)
			}
			l := parseReuseLine(t, got.stderr)
			switch {
			case tc.proc == same && (l.pid != last.pid || l.activation != last.activation+1):
				t.Errorf("served by pid %d (activation %d), want pid %d reused (activation %d)", l.pid, l.activation, last.pid, last.activation+1)
			case tc.proc == next && (l.pid == last.pid || l.activation != 1):
				t.Errorf("served by pid %d (activation %d), want a new process (last pid %d)", l.pid, l.activation, last.pid)
			}
			// The same descriptors at the same point of every activation:
			// nothing an activation gave stays behind.
			if i > 0 && tc.proc == same && l.fds-tc.extra != last.fds-lastExtra {
				t.Errorf("process holds %d descriptors (%d given), last activation %d (%d given)", l.fds, tc.extra, last.fds, lastExtra)
			}
			last, lastExtra = l, tc.extra
		})
	}
	st := srv.Stats().Programs[0]
	if st.Reused == 0 {
		t.Errorf("stats: %+v, want reused > 0", st)
	}
	wantNoZombies(t)
}

var lastExtra int

// TestReuseNeedsDeclaration: with MaxUses > 1, a program that does not call
// pool.Reusable (the test binary) still gets a fresh process per spawn, and
// with the default MaxUses a reusable one does too.
func TestReuseNeedsDeclaration(t *testing.T) {
	bin := buildReuseChild(t)
	self := selfProgram(t, "self", 1)
	self.MaxUses = 10
	fresh := contract.Program{Name: "fresh", Path: bin, MinIdle: 1, Allow: self.Allow}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{self, fresh}}, Options{ManualFill: true})
	for _, name := range []string{"self", "fresh"} {
		pids := map[int]bool{}
		for range 3 {
			srv.Fill()
			null, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			p, err := (&pool.Client{Socket: sock}).Spawn(context.Background(), name, pool.Attr{
				Argv: []string{"r"}, Env: []string{envChild + "=report"}, Files: []*os.File{null, null, null}})
			null.Close()
			if err != nil {
				t.Fatal(err)
			}
			if st, err := p.Wait(); err != nil || !st.Success() {
				t.Fatalf("%s: %v %v", name, st, err)
			}
			pids[p.Pid] = true
		}
		if len(pids) != 3 {
			t.Errorf("%s: 3 spawns served by %d processes, want 3", name, len(pids))
		}
	}
	if st := srv.Stats(); st.Programs[0].Reused+st.Programs[1].Reused != 0 {
		t.Errorf("stats: %+v, want nothing reused", st)
	}
}

// TestReuseMaxUses: a process serves MaxUses activations, then poold lets it
// go (it exits, is reaped) and the next spawn gets a new one.
func TestReuseMaxUses(t *testing.T) {
	bin := buildReuseChild(t)
	prog := contract.Program{Name: "reuse", Path: bin, MinIdle: 1, MaxUses: 2,
		Allow: []string{"uid:0", fmt.Sprintf("uid:%d", os.Getuid())}}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	var got []reuseLine
	for range 5 {
		srv.Fill()
		r := runChild(t, poolStartName(sock, "reuse"), []string{"h"}, []string{"X=1"}, "/", 0)
		if r.status != 0 || !r.hit {
			t.Fatalf("status %#x hit %v", r.status, r.hit)
		}
		got = append(got, parseReuseLine(t, r.stderr))
	}
	for i, l := range got {
		if want := i%2 + 1; l.activation != want {
			t.Errorf("spawn %d: activation %d of its process, want %d", i, l.activation, want)
		}
		if i%2 == 1 && l.pid != got[i-1].pid || i%2 == 0 && i > 0 && l.pid == got[i-1].pid {
			t.Errorf("spawn %d: pid %d after %d", i, l.pid, got[i-1].pid)
		}
	}
	srv.Fill()
	if st := srv.Stats().Programs[0]; st.Reused != 3 || st.Idle != 1 {
		t.Errorf("stats %+v: want 3 reused (after spawns 0, 2, 4), 1 idle", st.PoolState)
	}
}

// TestReuseNoLeaks: reused activations, retirement at MaxUses and a reused
// process that calls os.Exit leave poold holding no more descriptors than
// before it started, and no zombie.
func TestReuseNoLeaks(t *testing.T) {
	bin := buildReuseChild(t)
	prog := contract.Program{Name: "reuse", Path: bin, MinIdle: 1, MaxIdle: 2, MaxUses: 3,
		Allow: []string{"uid:0", fmt.Sprintf("uid:%d", os.Getuid())}}
	spawn := func(sock string, env ...string) {
		r := runChild(t, poolStartName(sock, "reuse"), []string{"h"}, append([]string{"X=1"}, env...), "/", 2)
		if r.fd3 != "fd3 here" {
			t.Fatalf("fd 3 %q", r.fd3)
		}
	}
	// Warm up what the process opens once (netpoll, /dev/null caches).
	srv, sock, stop := startServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{})
	srv.Fill()
	spawn(sock)
	stop()
	fds0 := settledFds(t)

	srv, sock, stop = startServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{})
	for i := range 10 {
		srv.Fill()
		if i == 4 {
			spawn(sock, "EXIT_CODE=0")
			continue
		}
		spawn(sock)
	}
	if st := srv.Stats().Programs[0]; st.Reused == 0 {
		t.Errorf("nothing reused: %+v", st.PoolState)
	}
	stop()
	wantNoZombies(t)
	wantFds(t, fds0)
}

// TestReuseSignalStaysWithItsActivation: a signal a client sends is
// delivered only while its activation owns the process. A reused process
// goes on to serve other clients; a signal from an activation that already
// ended (relaySignals used to check the end, then signal, with the next
// activation free to start in between) must not reach the next one.
func TestReuseSignalStaysWithItsActivation(t *testing.T) {
	bin := buildReuseChild(t)
	prog := contract.Program{Name: "reuse", Path: bin, MinIdle: 1, MaxUses: 10,
		Allow: []string{"uid:0", fmt.Sprintf("uid:%d", os.Getuid())}}
	srv, _ := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	srv.Fill()
	pr := srv.programs["reuse"]
	e := pr.pool.Take()
	if e == nil {
		t.Fatal("nothing parked")
	}
	p := e.(*proc)
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	// activate starts an activation with stdin; its end comes on ends.
	activate := func(stdin *os.File) (chan struct{}, chan ending) {
		act, ends := make(chan struct{}), make(chan ending, 1)
		p.setOwner(func(_ *proc, e ending) { ends <- e }, act)
		m := &pool.Msg{Argv: []string{"h"}, Env: []string{"X=1"}, Dir: "/"}
		if err := p.Activate(m, []*os.File{stdin, null, null}); err != nil {
			t.Fatal(err)
		}
		return act, ends
	}
	act1, ends := activate(null)
	if e := <-ends; e.done == nil {
		t.Fatalf("activation 1 ended by exit %v, want Done", e.ps)
	}
	// Activation 2 blocks reading stdin until w is closed.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	act2, ends := activate(r)
	r.Close()
	if p.signal(act1, syscall.SIGKILL) {
		t.Error("a signal of activation 1 was delivered during activation 2")
	}
	w.Close()
	if e := <-ends; e.done == nil {
		t.Fatalf("activation 2 ended by exit %v, want Done (killed by activation 1's signal?)", e.ps)
	}
	if p.signal(act2, syscall.SIGKILL) {
		t.Error("a signal of activation 2 was delivered after it ended")
	}
	// Activation 3's own signal reaches it.
	r, w, err = os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	act3, ends := activate(r)
	r.Close()
	if !p.signal(act3, syscall.SIGKILL) {
		t.Fatal("activation 3's own signal was not delivered")
	}
	e3 := <-ends
	if e3.ps == nil {
		t.Fatal("activation 3 ended with Done after SIGKILL")
	}
	if ws := e3.ps.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("activation 3 ended %v, want killed", e3.ps)
	}
}

// TestMaxUsesOneReportsReturn: with MaxUses 1 a reusable program gets a
// fresh process per spawn, as by default, but its end reaches the client
// from the process itself when main returns (a Done), before its exit;
// os.Exit still ends it with its own status, learnt at the reap. Every
// process is reaped; nothing counts as reused.
func TestMaxUsesOneReportsReturn(t *testing.T) {
	bin := buildReuseChild(t)
	prog := contract.Program{Name: "once", Path: bin, MinIdle: 1, MaxUses: 1,
		Allow: []string{"uid:0", fmt.Sprintf("uid:%d", os.Getuid())}}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})

	// The end of an activation whose main returned is a Done, and the
	// process exits by itself afterwards.
	srv.Fill()
	p := srv.programs["once"].pool.Take().(*proc)
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	ends := make(chan ending, 1)
	p.setOwner(func(_ *proc, e ending) { ends <- e }, make(chan struct{}))
	if err := p.Activate(&pool.Msg{Argv: []string{"h"}, Env: []string{"X=1"}, Dir: "/"}, []*os.File{null, null, null}); err != nil {
		t.Fatal(err)
	}
	if e := <-ends; e.done == nil {
		t.Fatalf("activation ended by the reap (%v), want the process's Done", e.ps)
	}
	p.retire() // what poold does with a process whose uses are spent
	<-p.reaped // it exits then by itself: nobody killed it

	pids := map[int]bool{}
	for i, tc := range []struct {
		env    []string
		status int
	}{{nil, 0}, {[]string{"EXIT_CODE=3"}, 3}, {nil, 0}} {
		srv.Fill()
		r := runChild(t, poolStartName(sock, "once"), []string{"h"}, append([]string{"X=1"}, tc.env...), "/", 0)
		if !r.hit || r.status.ExitStatus() != tc.status {
			t.Errorf("spawn %d: hit %v, status %#x, want exit %d", i, r.hit, r.status, tc.status)
		}
		l := parseReuseLine(t, r.stderr)
		if l.activation != 1 || pids[l.pid] {
			t.Errorf("spawn %d: pid %d activation %d, want a fresh process", i, l.pid, l.activation)
		}
		pids[l.pid] = true
	}
	if st := srv.Stats().Programs[0]; st.Reused != 0 {
		t.Errorf("stats %+v: want nothing reused", st.PoolState)
	}
	srv.Close()
	wantNoZombies(t)
}
