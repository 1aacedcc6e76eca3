package poold

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/pool"
)

// TestExecProgram: a program that does not import pool gets a prepared
// child that execs it on activation, with the activation's argv, env, cwd
// and descriptors, and its exit status comes back.
func TestExecProgram(t *testing.T) {
	sh := "/bin/sh"
	if _, err := os.Stat(sh); err != nil {
		t.Skip("no /bin/sh")
	}
	self, _ := os.Executable()
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{{Name: "sh", Path: sh, Exec: true, MinIdle: 1,
		Allow: []string{"*"}, Rlimits: map[string]uint64{"nofile": 77}}}}, Options{Self: self})
	srv.Fill()
	dir := t.TempDir()
	r, w, _ := os.Pipe()
	defer r.Close() // else its finalizer closes it during a later leak count
	p, err := (&pool.Client{Socket: sock}).Spawn(context.Background(), "sh", pool.Attr{
		Argv:  []string{"sh", "-c", `echo "$0 $1 $X $(pwd) $(ulimit -n)"; exit 7`, "sh", "one"},
		Env:   []string{"X=ex"},
		Dir:   dir,
		Files: []*os.File{nil, w, w},
	})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4096)
	n, _ := r.Read(out)
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !p.Hit || st.ExitCode() != 7 {
		t.Errorf("hit %v, %v; want a hit, exit status 7", p.Hit, st)
	}
	if got, want := strings.TrimSpace(string(out[:n])), "sh one ex "+dir+" 77"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

// TestExecMissingProgram: a program removed after poold loaded it (Path is
// checked at load): exec failing on activation is exit status 127 with the
// reason on the client's stderr; on a miss (started directly, as os/exec
// does) it is the spawn's error.
func TestExecMissingProgram(t *testing.T) {
	self, _ := os.Executable()
	prog := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{{Name: "gone", Path: prog, Exec: true,
		MaxIdle: 1, Allow: []string{"*"}}}}, Options{Self: self, ManualFill: true})
	os.Remove(prog)
	_, err := (&pool.Client{Socket: sock}).Spawn(context.Background(), "gone", pool.Attr{})
	if err == nil || !strings.Contains(err.Error(), prog) {
		t.Fatalf("miss: %v, want an error naming the program", err)
	}
	srv.Fill()
	r, w, _ := os.Pipe()
	defer r.Close() // else its finalizer closes it during a later leak count
	p, err := (&pool.Client{Socket: sock}).Spawn(context.Background(), "gone", pool.Attr{Files: []*os.File{nil, nil, w}})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 4096)
	n, _ := r.Read(msg)
	st, _ := p.Wait()
	if st.ExitCode() != 127 || !strings.Contains(string(msg[:n]), prog) {
		t.Fatalf("%v, stderr %q; want 127 naming the program", st, msg[:n])
	}
}

// TestMissStandardFds: a client that sends no descriptors (pool.Client
// always sends three; a raw client need not) gets /dev/null at 0, 1 and 2
// on a miss too, as a parked process has them, not closed descriptors the
// program's first open would take.
func TestMissStandardFds(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{{Name: "sh", Path: "/bin/sh", Exec: true,
		Allow: []string{"*"}}}}, Options{ManualFill: true})
	out := filepath.Join(t.TempDir(), "out")
	conn, err := (&pool.Client{Socket: sock}).Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Send(&pool.Msg{Type: pool.TypeSpawn, Name: "sh", Dir: "/", Env: []string{"OUT=" + out},
		Argv: []string{"sh", "-c", `r=; for i in 0 1 2; do [ -e /proc/self/fd/$i ] && r="$r$i"; done; echo "$r" > "$OUT"`}}, nil)
	if m, _, err := conn.Recv(); err != nil || m.Type != pool.TypeStarted || m.Flags&pool.FlagHit != 0 {
		t.Fatalf("spawn: %+v %v, want a miss started", m, err)
	}
	if m, _, err := conn.Recv(); err != nil || m.Type != pool.TypeExited || m.Status != 0 {
		t.Fatalf("exit: %+v %v", m, err)
	}
	b, err := os.ReadFile(out)
	if got := strings.TrimSpace(string(b)); err != nil || got != "012" {
		t.Fatalf("descriptors open among 0, 1, 2: %q (%v), want all", got, err)
	}
	_ = srv
}
