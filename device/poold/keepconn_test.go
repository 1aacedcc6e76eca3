package poold

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/pool"
)

// TestKeepConns: a KeepConns client makes one connection for spawns one
// after another, fresh and reused, hits and misses, a refused one in
// between; every spawn still gets its own process's exit status.
func TestKeepConns(t *testing.T) {
	bin := buildReuseChild(t)
	allow := []string{"uid:0", fmt.Sprintf("uid:%d", os.Getuid())}
	progs := []contract.Program{
		{Name: "fresh", Path: bin, MinIdle: 1, Allow: allow},
		{Name: "once", Path: bin, MinIdle: 1, MaxUses: 1, Allow: allow},
		{Name: "reuse", Path: bin, MinIdle: 1, MaxUses: 100, Allow: allow},
	}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: progs}, Options{ManualFill: true})
	c := &pool.Client{Socket: sock, KeepConns: true}
	defer c.Close()
	null := devNull(t)
	before := srv.Stats().Connections
	for i, name := range []string{"fresh", "once", "reuse", "reuse", "nope", "fresh", "once"} {
		if i%3 == 0 {
			srv.Fill() // the others may miss: a miss is served all the same
		}
		code := i % 4
		p, err := c.Spawn(context.Background(), name, pool.Attr{Argv: []string{"h"},
			Env: []string{fmt.Sprintf("EXIT_CODE=%d", code)}, Files: []*os.File{null, null, null}})
		if name == "nope" {
			if err == nil {
				t.Fatalf("spawn %d of %s: no refusal", i, name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("spawn %d of %s: %v", i, name, err)
		}
		st, err := p.Wait()
		if err != nil || st.ExitCode() != code {
			t.Fatalf("spawn %d of %s: %v %v, want exit %d", i, name, st, err, code)
		}
		if err := p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("signal after Wait: %v, want os.ErrProcessDone", err)
		}
	}
	// The error answer to "nope" leaves the connection usable too.
	if n := srv.Stats().Connections - before; n != 1 {
		t.Errorf("%d connections for the spawns, want 1", n)
	}
}

// TestKeepConnsSignalStaysWithItsSpawn: on a kept connection, a signal sent
// as a spawn's process ends must not reach the next spawn's, which is the
// same process when it is reused.
func TestKeepConnsSignalStaysWithItsSpawn(t *testing.T) {
	bin := buildReuseChild(t)
	prog := contract.Program{Name: "reuse", Path: bin, MinIdle: 1, MaxUses: 1000,
		Allow: []string{"uid:0", fmt.Sprintf("uid:%d", os.Getuid())}}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	srv.Fill()
	c := &pool.Client{Socket: sock, KeepConns: true}
	defer c.Close()
	null := devNull(t)
	spawn := func() (*pool.Process, *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		p, err := c.Spawn(context.Background(), "reuse", pool.Attr{Argv: []string{"h"}, Files: []*os.File{r, null, null}})
		if err != nil {
			t.Fatal(err)
		}
		return p, w
	}
	for i := range 20 {
		a, w := spawn()
		w.Close()                 // a's main returns
		a.Signal(syscall.SIGKILL) // races with a's end: may kill it, or be dropped
		a.Wait()
		b, w := spawn()
		w.Close()
		st, err := b.Wait()
		if err != nil || !st.Success() {
			t.Fatalf("round %d: the next spawn ended %v %v: a signal of the last one reached it", i, st, err)
		}
		srv.Fill()
	}
}

// TestKeepConnsAcrossRestart: a kept connection to a poold that stopped is
// replaced by a new one on the next spawn, and closing the client leaves no
// descriptor behind.
func TestKeepConnsAcrossRestart(t *testing.T) {
	prog := selfProgram(t, "child", 1)
	run := func(c *pool.Client) {
		t.Helper()
		null, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		defer null.Close()
		p, err := c.Spawn(context.Background(), "child", pool.Attr{
			Argv: []string{"r"}, Env: []string{envChild + "=report"}, Files: []*os.File{null, null, null}})
		if err != nil {
			t.Fatal(err)
		}
		if st, err := p.Wait(); err != nil || !st.Success() {
			t.Fatalf("%v %v", st, err)
		}
	}
	srv, sock, stop := startServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{})
	srv.Fill()
	warm := &pool.Client{Socket: sock, KeepConns: true}
	run(warm) // what the process opens once
	warm.Close()
	stop()
	fds0 := settledFds(t)

	cfg := &contract.PooldConfig{Programs: []contract.Program{prog}}
	srv, sock, stop = startServer(t, cfg, Options{})
	srv.Fill()
	c := &pool.Client{Socket: sock, KeepConns: true}
	run(c)
	run(c)
	stop()
	srv2, stop2, err := Start(&contract.PooldConfig{Socket: sock, Programs: []contract.Program{prog}}, Options{Log: testLogger(t), NoTicker: true})
	if err != nil {
		t.Fatal(err)
	}
	srv2.Fill()
	run(c) // the kept connection is dead: a new one carries it
	if n := srv2.Stats().Connections; n != 1 {
		t.Errorf("restarted poold saw %d connections, want 1", n)
	}
	c.Close()
	stop2()
	wantFds(t, fds0)
	wantNoZombies(t)
}

// TestEndPipe drives the protocol by hand: a reusable process whose main
// returns writes its end record to the client's end pipe, and poold then
// sends no Exited (the next answer on the connection is the next
// request's); one that calls os.Exit leaves the pipe unwritten and poold
// reports its status; a miss (no parked process) never gets the pipe.
func TestEndPipe(t *testing.T) {
	bin := buildReuseChild(t)
	for _, uses := range []int{1, 100} {
		t.Run(fmt.Sprintf("MaxUses=%d", uses), func(t *testing.T) { testEndPipe(t, bin, uses) })
	}
}

func testEndPipe(t *testing.T, bin string, uses int) {
	prog := contract.Program{Name: "reuse", Path: bin, MinIdle: 1, MaxUses: uses,
		Allow: []string{"uid:0", fmt.Sprintf("uid:%d", os.Getuid())}}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	conn, err := (&pool.Client{Socket: sock}).Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	null := devNull(t)
	// spawn sends one spawn and returns what the end pipe carried (nil:
	// it closed unwritten).
	spawn := func(env ...string) *[pool.EndRecordSize]byte {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		m := &pool.Msg{Type: pool.TypeSpawn, Name: "reuse", Argv: []string{"h"}, Env: env, Dir: "/",
			Flags: pool.FlagKeepConn | pool.FlagEndPipe}
		err = conn.Send(m, []*os.File{null, null, null, w})
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		if a, files, err := conn.Recv(); err != nil || a.Type != pool.TypeStarted {
			t.Fatalf("answer %+v %v", a, err)
		} else {
			closeFiles(files)
		}
		var rec [pool.EndRecordSize]byte
		if _, err := io.ReadFull(r, rec[:]); err != nil {
			return nil
		}
		return &rec
	}
	// next checks the next message on the connection is of type want.
	next := func(want pool.Type) *pool.Msg {
		t.Helper()
		m, files, err := conn.Recv()
		closeFiles(files)
		if err != nil || m.Type != want {
			t.Fatalf("got %+v %v, want %v", m, err, want)
		}
		return m
	}
	srv.Fill()
	rec := spawn("X=1")
	if rec == nil {
		t.Fatal("main returned, but the end pipe closed unwritten")
	}
	if st, _ := pool.DecodeEndRecord(*rec); st != 0 {
		t.Errorf("end record status %#x, want 0", st)
	}
	// No Exited follows: a stats request's reply is the next message.
	if err := conn.Send(&pool.Msg{Type: pool.TypeStats}, nil); err != nil {
		t.Fatal(err)
	}
	next(pool.TypeStatsReply)

	if rec := spawn("EXIT_CODE=7"); rec != nil {
		t.Fatalf("os.Exit: end record %v, want none", rec)
	}
	if m := next(pool.TypeExited); syscall.WaitStatus(m.Status).ExitStatus() != 7 {
		t.Errorf("Exited status %#x, want exit 7", m.Status)
	}

	// The process that exited is not replaced (ManualFill): a miss, the
	// program started directly.
	if st := srv.Stats().Programs[0]; st.Idle != 0 {
		t.Fatalf("%d parked, want none", st.Idle)
	}
	if rec := spawn("X=1"); rec != nil {
		t.Fatalf("miss: end record %v, want none", rec)
	}
	next(pool.TypeExited)
}

// TestEndPipeClient: the pool client hears a reusable process's end by the
// end pipe on a kept connection, with the status and resource use, and an
// os.Exit's status from poold, spawn after spawn.
func TestEndPipeClient(t *testing.T) {
	bin := buildReuseChild(t)
	prog := contract.Program{Name: "reuse", Path: bin, MinIdle: 2, MaxUses: 100,
		Allow: []string{"uid:0", fmt.Sprintf("uid:%d", os.Getuid())}}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	c := &pool.Client{Socket: sock, KeepConns: true}
	defer c.Close()
	null := devNull(t)
	for i, code := range []int{-1, -1, 5, -1, 0, -1} {
		srv.Fill()
		env := []string{"X=1"}
		if code >= 0 {
			env = append(env, fmt.Sprintf("EXIT_CODE=%d", code))
		}
		p, err := c.Spawn(context.Background(), "reuse", pool.Attr{Argv: []string{"h"}, Env: env, Files: []*os.File{null, null, null}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := p.Wait()
		if err != nil || st.ExitCode() != max(code, 0) {
			t.Fatalf("spawn %d: %v %v, want exit %d", i, st, err, max(code, 0))
		}
		if st.Usage.UserMicros+st.Usage.SystemMicros < 0 || st.Usage.MaxRSSKiB <= 0 {
			t.Errorf("spawn %d: usage %+v", i, st.Usage)
		}
	}
}

// devNull opens /dev/null for the test's duration.
func devNull(t *testing.T) *os.File {
	t.Helper()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { null.Close() })
	return null
}

// TestSpawnOfADyingParkedProcess: a parked process killed just as a spawn
// takes it (its reaper may take the activation's owner before activate
// gives it back) neither hangs the spawn nor ends it with the dead
// process's status: the next parked process, or a direct start, serves it.
func TestSpawnOfADyingParkedProcess(t *testing.T) {
	prog := selfProgram(t, "child", 1)
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	null := devNull(t)
	for i := range 20 {
		srv.Fill()
		pr, _ := srv.lookup("child")
		pr.pool.mu.Lock()
		victim := pr.pool.idle[0].e.(*proc)
		pr.pool.mu.Unlock()
		syscall.Kill(victim.pid, syscall.SIGKILL) // no wait: race the spawn
		p, err := (&pool.Client{Socket: sock}).Spawn(context.Background(), "child", pool.Attr{
			Argv: []string{"r"}, Env: []string{envChild + "=report"}, Files: []*os.File{null, null, null}})
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		st, err := p.Wait()
		switch {
		case err != nil:
			t.Fatalf("round %d: %v", i, err)
		case p.Pid == victim.pid && !(st.Status.Signaled() && st.Status.Signal() == syscall.SIGKILL):
			t.Fatalf("round %d: activated before the kill landed, ended %v, want killed", i, st)
		case p.Pid != victim.pid && !st.Success():
			t.Fatalf("round %d: pid %d (victim %d) ended %v", i, p.Pid, victim.pid, st)
		}
		<-victim.reaped
	}
}

// TestKeptConnectionsForgotten: connections a client closes right after
// its spawns ended, kept or not, leave no entry in poold's table of client
// connections.
func TestKeptConnectionsForgotten(t *testing.T) {
	bin := buildReuseChild(t)
	prog := contract.Program{Name: "reuse", Path: bin, MinIdle: 2, MaxUses: 100,
		Allow: []string{"uid:0", fmt.Sprintf("uid:%d", os.Getuid())}}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{})
	null := devNull(t)
	for range 10 {
		c := &pool.Client{Socket: sock, KeepConns: true}
		p, err := c.Spawn(context.Background(), "reuse", pool.Attr{Argv: []string{"h"}, Files: []*os.File{null, null, null}})
		if err != nil {
			t.Fatal(err)
		}
		if st, err := p.Wait(); err != nil || !st.Success() {
			t.Fatalf("%v %v", st, err)
		}
		c.Close() // gone before poold may have handled the Done
	}
	n := -1
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		srv.mu.Lock()
		n = len(srv.clients)
		srv.mu.Unlock()
		if n == 0 {
			return
		}
	}
	t.Errorf("%d client connections still recorded after their clients left", n)
}
