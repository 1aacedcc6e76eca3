package poold

import (
	"bufio"
	"context"
	"log"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/pool"
)

// spawnBlock starts the "block" child (it says ready, then waits for its
// stdin to close) and returns it with the write end of its stdin and its
// stdout; both are closed at cleanup, or earlier by the caller.
func spawnBlock(t *testing.T, sock, name string) (*pool.Process, *os.File, *os.File) {
	t.Helper()
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	p, err := (&pool.Client{Socket: sock}).Spawn(context.Background(), name, pool.Attr{
		Argv: []string{"block"}, Env: []string{envChild + "=block"}, Files: []*os.File{inR, outW, outW}})
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(outR)
	if line, err := br.ReadString('\n'); line != "ready\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return p, inW, outR
}

func TestRefusesUnauthorisedPeer(t *testing.T) {
	prog := selfProgram(t, "child", 1)
	prog.Allow = []string{"uid:4242"}
	lb := &logBuf{t: t}
	_, sock := testServer(t, &contract.PooldConfig{Admins: []string{"uid:4243"}, Programs: []contract.Program{prog}},
		Options{Log: log.New(lb, "", 0)})
	c := &pool.Client{Socket: sock}
	_, err := c.Spawn(context.Background(), "child", pool.Attr{Env: []string{envChild + "=report"}})
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("spawn by uid %d: %v, want permission denied", os.Getuid(), err)
	}
	if err := c.Reduce(context.Background()); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("reduce by a non-admin: %v", err)
	}
	for _, want := range []string{"refused: pid", "may not spawn child", "may not reduce"} {
		if !strings.Contains(lb.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, lb.String())
		}
	}
	_, err = c.Spawn(context.Background(), "nosuch", pool.Attr{})
	if err == nil || !strings.Contains(err.Error(), `no program "nosuch"`) {
		t.Fatalf("unknown program: %v", err)
	}
}

func TestSignalAndUsage(t *testing.T) {
	_, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{selfProgram(t, "child", 1)}}, Options{})
	p, _, _ := spawnBlock(t, sock, "child")
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Status.Signaled() || st.Status.Signal() != syscall.SIGTERM || st.ExitCode() != -1 {
		t.Fatalf("status %v, want killed by SIGTERM", st)
	}
	if st.Usage.MaxRSSKiB == 0 {
		t.Fatalf("no resource use reported: %+v", st.Usage)
	}
}

// TestParkedChildDies: a parked process killed from outside is replaced, and
// spawns still work.
func TestParkedChildDies(t *testing.T) {
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{selfProgram(t, "child", 1)}}, Options{})
	srv.Fill()
	pr, _ := srv.lookup("child")
	killParked(t, srv, "child")
	if s := pr.pool.State(); s.Died != 1 || s.Idle != 0 {
		t.Fatalf("after the parked child died: %+v, want it removed", s)
	}
	p, stdin, _ := spawnBlock(t, sock, "child")
	stdin.Close()
	if st, err := p.Wait(); err != nil || !st.Success() {
		t.Fatalf("spawn after a death: %v %v", st, err)
	}
}

// TestClientDisconnects: a client that hangs up before or after Started
// changes nothing for poold: the process still runs, is reaped (no zombie,
// no /proc entry left), and poold still serves.
func TestClientDisconnects(t *testing.T) {
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{selfProgram(t, "child", 1)}}, Options{})
	p, stdin, _ := spawnBlock(t, sock, "child")
	p.Release()
	stdin.Close() // the child exits now; poold reaps it and drops the status
	waitGone(t, p.Pid)
	disconnectMidRequest(t, sock, "child")
	waitInactive(t, srv, 3)
	wantNoZombies(t)
	// poold still serves.
	p2, stdin2, _ := spawnBlock(t, sock, "child")
	stdin2.Close()
	if st, err := p2.Wait(); err != nil || !st.Success() {
		t.Fatalf("spawn after disconnects: %v %v", st, err)
	}
}

// disconnectMidRequest has clients hang up mid-request: one sends a spawn
// and closes at once (before Started), one sends a spawn with descriptors
// and closes, one sends garbage.
func disconnectMidRequest(t *testing.T, sock, name string) {
	t.Helper()
	c := &pool.Client{Socket: sock}
	conn, err := c.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	conn.Send(&pool.Msg{Type: pool.TypeSpawn, Name: name, Env: []string{envChild + "=report"}}, nil)
	conn.Close()
	null, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	conn, _ = c.Dial(context.Background())
	conn.Send(&pool.Msg{Type: pool.TypeSpawn, Name: name, Argv: []string{"r"}, Env: []string{envChild + "=report"}, Dir: "/"},
		[]*os.File{null, null, null})
	conn.Close()
	null.Close()
	conn, _ = c.Dial(context.Background())
	conn.Write([]byte("garbage"))
	conn.Close()
}

// waitInactive waits until srv served spawns spawns in all (hits, misses,
// spawns as the client) and no activated process is left unreaped (a
// disconnected client's are reaped without anyone waiting for them).
func waitInactive(t *testing.T, srv *Server, spawns uint64) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		active, served := 0, uint64(0)
		for _, ps := range srv.Stats().Programs {
			active += ps.Active
			served += ps.Hits + ps.Misses + ps.AsPeer
		}
		if active == 0 && served >= spawns {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d spawns served, %d activated processes not ended", served, spawns, active)
		}
	}
}
