package poold

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/pool"
)

// parkedPids lists the parked processes of program name, oldest first.
func parkedPids(srv *Server, name string) []int {
	pr, _ := srv.lookup(name)
	pr.pool.mu.Lock()
	defer pr.pool.mu.Unlock()
	var out []int
	for _, ie := range pr.pool.idle {
		out = append(out, ie.e.Pid())
	}
	return out
}

// setMemoryMax changes a running pool's ceiling (a reload would make a new
// pool): tests set it from what the pool measured.
func setMemoryMax(srv *Server, name string, v int64) {
	pr, _ := srv.lookup(name)
	pr.pool.mu.Lock()
	pr.pool.lim.MemoryMax = v
	pr.pool.mu.Unlock()
}

// gone reports whether pid no longer exists: it exited and was reaped (a
// zombie still has its /proc entry).
func gone(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return os.IsNotExist(err)
}

// waitGone waits for a process poold lets go asynchronously (a retired
// reused process) to be reaped; the bound is only there to end a test that
// would otherwise hang.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !gone(pid); {
		if time.Now().After(deadline) {
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			t.Fatalf("pid %d still there: %s", pid, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// smapsPss is a process's proportional set size summed over its mappings
// in /proc/pid/smaps (poold reads smaps_rollup: this is an independent
// count).
func smapsPss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var kb int64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("Pss:")); ok {
			var n int64
			fmt.Sscan(string(v), &n)
			kb += n
		}
	}
	return kb << 10
}

// TestMemoryMaxRealProcesses: with real parked processes, a ceiling below
// what the pool holds makes reduce trim the oldest until it fits (the
// trimmed processes are gone), and Fill starts none that would pass it,
// MinIdle notwithstanding.
func TestMemoryMaxRealProcesses(t *testing.T) {
	prog := selfProgram(t, "child", 3)
	prog.MemoryMax = 1 << 40 // measured, not binding yet
	srv, _ := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	srv.Fill()
	before := parkedPids(srv, "child")
	held := srv.Stats().Programs[0].HeldBytes
	if len(before) != 3 || held <= 0 {
		t.Fatalf("parked %v holding %d; want 3 holding memory", before, held)
	}
	ceiling := held - 1
	setMemoryMax(srv, "child", ceiling)
	if n := srv.ReduceAll(); n == 0 {
		t.Fatalf("reduce trimmed nothing with %d held over a %d ceiling", held, ceiling)
	}
	after := parkedPids(srv, "child")
	if len(after) == 0 || len(after) >= 3 || after[len(after)-1] != before[2] {
		t.Fatalf("parked %v after reduce (before %v); want the oldest trimmed, the newest kept", after, before)
	}
	for _, pid := range before[:3-len(after)] {
		if !gone(pid) {
			t.Errorf("trimmed pid %d still exists", pid)
		}
	}
	s := srv.Stats().Programs[0]
	if s.OverMemory != uint64(3-len(after)) || s.Reduced != 0 || s.HeldBytes > ceiling {
		t.Fatalf("after trimming: %+v; want %d over memory, held ≤ %d", s.PoolState, 3-len(after), ceiling)
	}
	srv.Fill()
	if got := parkedPids(srv, "child"); len(got) != len(after) || srv.Stats().Programs[0].Added != 3 {
		t.Fatalf("Fill under the ceiling parked %v (had %v): %+v; want none started", got, after, srv.Stats().Programs[0].PoolState)
	}
}

// TestMemoryMaxRefusesReturn: a reused process that comes back from an
// activation when the pool holds all MemoryMax allows is let go (it exits
// and is reaped) instead of parking again.
func TestMemoryMaxRefusesReturn(t *testing.T) {
	bin := buildReuseChild(t)
	prog := contract.Program{Name: "reuse", Path: bin, MinIdle: 1, MaxIdle: 2, MaxUses: 10, MemoryMax: 1 << 40,
		Allow: []string{"uid:0", fmt.Sprintf("uid:%d", os.Getuid())}}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	srv.Fill()
	// reusechild reads its stdin to the end: it is active until we close it.
	a, aIn, _ := spawnBlockReuse(t, sock)
	b, bIn, _ := spawnBlockReuse(t, sock)
	if !a.Hit || b.Hit {
		t.Fatalf("hit %v, %v: want a hit, then a miss", a.Hit, b.Hit)
	}
	srv.Fill() // the miss raised the level: a second process parks
	parked := parkedPids(srv, "reuse")
	if len(parked) != 1 {
		t.Fatalf("parked %v, want 1", parked)
	}
	pr, _ := srv.lookup("reuse")
	pr.pool.mu.Lock()
	full := pr.pool.reserved()
	pr.pool.mu.Unlock()
	setMemoryMax(srv, "reuse", full+4096)
	aIn.Close()
	if st, err := a.Wait(); err != nil || !st.Success() {
		t.Fatalf("a: %v %v", st, err)
	}
	waitGone(t, a.Pid)
	s := srv.Stats().Programs[0]
	if s.Reused != 0 || s.OverMemory != 1 || s.Idle != 1 {
		t.Fatalf("%+v; want a's process let go (1 over memory), not reused", s.PoolState)
	}
	bIn.Close()
	b.Wait()
	wantNoZombies(t)
}

// spawnBlockReuse starts reusechild with its stdin a pipe we hold: it runs
// until we close it.
func spawnBlockReuse(t *testing.T, sock string) (*pool.Process, *os.File, *os.File) {
	t.Helper()
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	p, err := (&pool.Client{Socket: sock}).Spawn(t.Context(), "reuse", pool.Attr{
		Argv: []string{"h"}, Env: []string{"X=1"}, Files: []*os.File{inR, outW, outW, outW}})
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inW.Close(); outR.Close() })
	go func() {
		var b [4096]byte
		for {
			if _, err := outR.Read(b[:]); err != nil {
				return
			}
		}
	}()
	return p, inW, outR
}
