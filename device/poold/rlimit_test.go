package poold

import (
	"bytes"
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/pool"
)

// lowerSoftNofile makes this process's soft RLIMIT_NOFILE lower than its
// hard one for the test, as a system's defaults often are (1024/4096): the
// Go runtime of a child then raises it at start and remembers the original
// to restore in its children and before exec.
func lowerSoftNofile(t *testing.T) {
	t.Helper()
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	if r.Max < 200 {
		t.Skipf("hard RLIMIT_NOFILE %d", r.Max)
	}
	low := r
	low.Cur = 150
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r) })
}

// TestRlimits: a program's limits hold from the start of main (Go) or the
// first instruction (Exec) on hits and misses alike, for the program and
// what it starts; a limit that cannot be set fails the spawn.
func TestRlimits(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	lowerSoftNofile(t)
	self, _ := os.Executable()
	goProg := selfProgram(t, "go", 1)
	goProg.Rlimits = map[string]uint64{"nofile": 77}
	shProg := contract.Program{Name: "sh", Path: "/bin/sh", Exec: true, MinIdle: 1, Allow: goProg.Allow,
		Rlimits: map[string]uint64{"nofile": 77}}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{goProg, shProg}}, Options{Self: self, ManualFill: true})
	run := func(name string, argv, env []string) (string, bool) {
		t.Helper()
		r, w, _ := os.Pipe()
		defer r.Close()
		p, err := (&pool.Client{Socket: sock}).Spawn(context.Background(), name, pool.Attr{
			Argv: argv, Env: env, Dir: "/", Files: []*os.File{nil, w, w}})
		w.Close()
		if err != nil {
			t.Fatalf("spawn %s: %v", name, err)
		}
		var out bytes.Buffer
		out.ReadFrom(r)
		if st, err := p.Wait(); err != nil || !st.Success() {
			t.Fatalf("%s: %v %v, output %q", name, st, err, out.String())
		}
		return strings.TrimSpace(out.String()), p.Hit
	}
	for _, hit := range []bool{false, true} {
		if hit {
			srv.Fill()
		}
		got, wasHit := run("go", []string{"limits"}, []string{envChild + "=limits"})
		if want := "self 77 77 child 77 77"; got != want || wasHit != hit {
			t.Errorf("Go program (hit %v): %q, want %q", wasHit, got, want)
		}
		// The shell reads its limit before anything else it runs.
		got, wasHit = run("sh", []string{"sh", "-c", "echo $(ulimit -Sn) $(ulimit -Hn)"}, nil)
		if want := "77 77"; got != want || wasHit != hit {
			t.Errorf("Exec program (hit %v): %q, want %q", wasHit, got, want)
		}
	}

	// Above the kernel's nr_open even root cannot set nofile: the spawn
	// fails, naming the limit, and nothing runs without it.
	bad := selfProgram(t, "bad", 0)
	bad.Rlimits = map[string]uint64{"nofile": 1 << 40}
	srv, sock = testServer(t, &contract.PooldConfig{Programs: []contract.Program{bad}}, Options{ManualFill: true})
	_, err := (&pool.Client{Socket: sock}).Spawn(context.Background(), "bad", pool.Attr{
		Argv: []string{"r"}, Env: []string{envChild + "=report"}})
	if err == nil || !strings.Contains(err.Error(), "rlimit nofile=1099511627776") {
		t.Fatalf("spawn with an impossible limit: %v, want an error naming it", err)
	}
	wantNoZombies(t)
	_ = srv
}
