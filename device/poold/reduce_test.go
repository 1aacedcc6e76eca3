package poold

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/pool"
)

// TestReduceFreesMemory: with real processes, a burst raises the pool,
// reduce (asked for by an admin client) trims what stayed idle past the
// timeout, and the memory they held is gone.
func TestReduceFreesMemory(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	prog := selfProgram(t, "child", 1)
	prog.MaxIdle = 4
	prog.IdleTimeout = "200ms"
	srv, sock := testServer(t, &contract.PooldConfig{Admins: []string{fmt.Sprintf("uid:%d", os.Getuid())}, Programs: []contract.Program{prog}},
		Options{Clock: clk, ManualFill: true})
	srv.Fill()
	// A burst of concurrent spawns: the first is a hit, the others miss.
	var procs []*pool.Process
	var ins []*os.File
	for range 4 {
		p, in, _ := spawnBlock(t, sock, "child")
		procs, ins = append(procs, p), append(ins, in)
	}
	for i, p := range procs {
		ins[i].Close()
		p.Wait()
	}
	srv.Fill()
	st, err := (&pool.Client{Socket: sock}).Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ps := st.Programs[0]
	if ps.Hits != 1 || ps.Misses != 3 || ps.Idle != 4 || ps.HeldBytes <= 0 {
		t.Fatalf("after the burst: %+v; want 1 hit, 3 misses, 4 parked holding memory", ps)
	}
	held := ps.HeldBytes
	clk.Advance(199 * time.Millisecond)
	if err := (&pool.Client{Socket: sock}).Reduce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := srv.Stats().Programs[0]; s.Idle != 4 {
		t.Fatalf("reduce before the timeout trimmed: %+v", s)
	}
	before := parkedPids(srv, "child")
	clk.Advance(time.Millisecond)
	if err := (&pool.Client{Socket: sock}).Reduce(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := srv.Stats().Programs[0]
	if s.Idle != 1 || s.Reduced != 3 || s.HeldBytes >= held/2 {
		t.Fatalf("after reduce: %+v (held %d before); want 1 parked, 3 reduced, memory freed", s, held)
	}
	// The trimmed processes are gone, reaped (a zombie keeps its /proc
	// entry) by the time the reduce request is answered.
	after := parkedPids(srv, "child")
	if len(before) != 4 || len(after) != 1 || after[0] != before[3] {
		t.Fatalf("parked %v before reduce, %v after; want the newest kept", before, after)
	}
	for _, pid := range before[:3] {
		if !gone(pid) {
			t.Errorf("trimmed pid %d still exists", pid)
		}
	}
	wantNoZombies(t)
	// What poold reports held is what the kernel counts for the parked
	// process left (PSS summed over /proc/pid/smaps, apart from poold's
	// smaps_rollup), within 10 %.
	var real int64
	for _, pid := range after {
		real += smapsPss(t, pid)
	}
	if s := srv.Stats().Programs[0]; s.HeldBytes < real*9/10 || s.HeldBytes > real*11/10 {
		t.Errorf("held_bytes %d, the parked processes' PSS %d", s.HeldBytes, real)
	}
	if len(srv.Stats().SpawnLatency) == 0 || len(s.HitLatency) == 0 || len(s.MissLatency) == 0 {
		t.Fatalf("latency histograms empty: %+v", srv.Stats())
	}
}

// TestReload: an unchanged program keeps its parked processes, a changed
// one is rebuilt, a removed one is gone, an added one appears.
func TestReload(t *testing.T) {
	a, b := selfProgram(t, "a", 1), selfProgram(t, "b", 1)
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{a, b}}, Options{})
	srv.Fill()
	pa, _ := srv.lookup("a")
	b2 := b
	b2.MinIdle = 2
	c := selfProgram(t, "c", 1)
	if err := srv.Reload(&contract.PooldConfig{Socket: sock, Programs: []contract.Program{a, c}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := srv.lookup("a"); got != pa {
		t.Error("unchanged program a was rebuilt")
	}
	if got, _ := srv.lookup("b"); got != nil {
		t.Error("removed program b still there")
	}
	if err := srv.Reload(&contract.PooldConfig{Socket: sock, Programs: []contract.Program{a, b2, c}}); err != nil {
		t.Fatal(err)
	}
	srv.Fill()
	if s := srv.Stats(); len(s.Programs) != 3 || s.Programs[1].Idle != 2 {
		t.Fatalf("after reload: %+v", s.Programs)
	}
	if err := srv.Reload(&contract.PooldConfig{Programs: []contract.Program{{Name: "bad name!"}}}); err == nil {
		t.Fatal("a bad config was accepted")
	}
	if s := srv.Stats(); len(s.Programs) != 3 {
		t.Fatal("a refused reload changed the pools")
	}
	spawnReportName(t, sock, "c")
}
