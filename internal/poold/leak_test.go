package poold

import (
	"context"
	"os"
	"testing"

	"github.com/nvboot/nvboot/pool"
)

// TestNoLeaks: after hits, misses, signals, a parked child's death, reduce,
// reload and shutdown, poold holds no more descriptors than before it
// started and has left no zombie.
func TestNoLeaks(t *testing.T) {
	// Warm up what the process opens once (netpoll, /dev/null caches).
	_, sock, stop := startServer(t, &Config{Programs: []Program{selfProgram(t, "child", 1)}}, Options{})
	spawnReport(t, sock)
	stop()
	fds0 := countFds(t)

	clk := &fakeClock{}
	prog := selfProgram(t, "child", 2)
	prog.IdleTimeout = "1s"
	srv, sock, stop := startServer(t, &Config{Programs: []Program{prog}}, Options{Clock: clk})
	for i := range 12 {
		if i%3 == 0 {
			srv.Fill()
		}
		spawnReport(t, sock)
	}
	p, in, out := spawnBlock(t, sock, "child")
	p.Kill()
	p.Wait()
	in.Close()
	out.Close()
	srv.Fill()
	killParked(t, srv, "child")
	srv.Fill()
	clk.Advance(2e9)
	srv.ReduceAll()
	prog2 := prog
	prog2.MinIdle = 1
	if err := srv.Reload(&Config{Socket: sock, Programs: []Program{prog2}}); err != nil {
		t.Fatal(err)
	}
	srv.Fill()
	spawnReport(t, sock)
	stop()
	if z := zombies(); len(z) != 0 {
		t.Errorf("zombies left: %v", z)
	}
	if n := countFds(t); n != fds0 {
		t.Errorf("descriptors: %d after, %d before", n, fds0)
	}
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
