package poold

import (
	"context"
	"os"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/pool"
)

// TestNoLeaks: after hits, misses, signals, clients that hang up
// mid-request (hits and misses), a parked child's death, reduce, reload and
// shutdown, poold holds no more descriptors than before it started and has
// left no zombie.
func TestNoLeaks(t *testing.T) {
	// Warm up what the process opens once (netpoll, /dev/null caches).
	_, sock, stop := startServer(t, &contract.PooldConfig{Programs: []contract.Program{selfProgram(t, "child", 1)}}, Options{})
	spawnReport(t, sock)
	stop()
	fds0 := settledFds(t)

	clk := &fakeClock{}
	prog := selfProgram(t, "child", 2)
	prog.IdleTimeout = "1s"
	// Programs that never keep a parked process: every spawn misses,
	// started directly, or through the parking path (Rlimits).
	cold, coldLim := selfProgram(t, "cold", 0), selfProgram(t, "coldlim", 0)
	cold.MaxIdle, coldLim.MaxIdle = 0, 0
	coldLim.Rlimits = map[string]uint64{"nofile": 1000}
	srv, sock, stop := startServer(t, &contract.PooldConfig{Programs: []contract.Program{prog, cold, coldLim}}, Options{Clock: clk})
	for i := range 12 {
		if i%3 == 0 {
			srv.Fill()
		}
		spawnReport(t, sock)
	}
	spawnReportName(t, sock, "cold")
	spawnReportName(t, sock, "coldlim")
	p, in, out := spawnBlock(t, sock, "child")
	p.Kill()
	p.Wait()
	in.Close()
	out.Close()
	// Clients that hang up mid-request, on hits and on misses.
	srv.Fill()
	served := uint64(0)
	for _, ps := range srv.Stats().Programs {
		served += ps.Hits + ps.Misses
	}
	for _, name := range []string{"child", "cold", "coldlim"} {
		disconnectMidRequest(t, sock, name)
		served += 2
		waitInactive(t, srv, served)
	}
	p, in, out = spawnBlock(t, sock, "child")
	p.Release()
	in.Close()
	out.Close()
	waitGone(t, p.Pid)
	waitInactive(t, srv, served+1)
	prog2 := prog
	prog2.MinIdle = 1
	cfg2 := &contract.PooldConfig{Socket: sock, Programs: []contract.Program{prog2, cold, coldLim}}
	srv.Fill()
	killParked(t, srv, "child")
	srv.Fill()
	clk.Advance(2e9)
	srv.ReduceAll()
	if err := srv.Reload(cfg2); err != nil {
		t.Fatal(err)
	}
	srv.Fill()
	spawnReport(t, sock)
	stop()
	wantNoZombies(t)
	wantFds(t, fds0)
}

func spawnReport(t *testing.T, sock string) {
	t.Helper()
	spawnReportName(t, sock, "child")
}

func spawnReportName(t *testing.T, sock, name string) {
	t.Helper()
	null, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	defer null.Close()
	p, err := (&pool.Client{Socket: sock}).Spawn(context.Background(), name, pool.Attr{
		Argv: []string{"r"}, Env: []string{envChild + "=report"}, Files: []*os.File{null, null, null}})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(); err != nil || !st.Success() {
		t.Fatalf("report child: %v %v", st, err)
	}
}
