package poold

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nvboot/nvboot/pool"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeStarter makes entries that hold mem bytes each; live counts the
// entries not killed.
type fakeStarter struct {
	mem    int64
	fail   bool
	next   int
	live   map[int]bool
	starts int
	hook   func() // run inside Start, while the entry is starting
}

type fakeEntry struct {
	id  int
	s   *fakeStarter
	mem int64
}

func (e *fakeEntry) Pid() int                             { return e.id }
func (e *fakeEntry) Mem() int64                           { return e.mem }
func (e *fakeEntry) Activate(*pool.Msg, []*os.File) error { delete(e.s.live, e.id); return nil }
func (e *fakeEntry) Kill()                                { delete(e.s.live, e.id) }
func (s *fakeStarter) Start() (Entry, error) {
	s.starts++
	if s.hook != nil {
		s.hook()
	}
	if s.fail {
		return nil, errors.New("no such program")
	}
	s.next++
	if s.live == nil {
		s.live = map[int]bool{}
	}
	s.live[s.next] = true
	return &fakeEntry{id: s.next, s: s, mem: s.mem}, nil
}

func newTestPool(lim Limits) (*Pool, *fakeClock, *fakeStarter) {
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	st := &fakeStarter{mem: 1 << 20}
	return NewPool(lim, clk, st), clk, st
}

func TestPoolAddReuse(t *testing.T) {
	p, _, st := newTestPool(Limits{MinIdle: 2, MaxIdle: 4})
	if n := p.Fill(); n != 2 {
		t.Fatalf("first Fill added %d, want MinIdle 2", n)
	}
	// Reuse: two hits hand out the newest entry first.
	if e := p.Take(); e == nil || e.Pid() != 2 {
		t.Fatalf("Take = %v, want the newest entry (2)", e)
	}
	if e := p.Take(); e == nil || e.Pid() != 1 {
		t.Fatalf("second Take = %v, want entry 1", e)
	}
	// Add: replenished to the level after activation.
	if n := p.Fill(); n != 2 {
		t.Fatalf("replenish added %d, want 2", n)
	}
	// A burst: every miss raises the level, up to MaxIdle.
	for range 2 {
		p.Take()
	}
	for range 5 {
		if e := p.Take(); e != nil {
			t.Fatal("Take on an empty pool returned an entry")
		}
	}
	s := p.State()
	if s.Hits != 4 || s.Misses != 5 || s.Want != 4 {
		t.Fatalf("after burst: %+v, want 4 hits, 5 misses, want 4 (MaxIdle)", s)
	}
	if n := p.Fill(); n != 4 || p.State().Idle != 4 || st.starts != 8 {
		t.Fatalf("Fill after burst added %d (idle %d, %d starts), want 4 (8 starts in all)", n, p.State().Idle, st.starts)
	}
	if n := p.Fill(); n != 0 {
		t.Fatalf("Fill of a full pool added %d", n)
	}
}

func TestPoolReduceTimings(t *testing.T) {
	const timeout = 500 * time.Millisecond
	p, clk, st := newTestPool(Limits{MinIdle: 1, MaxIdle: 3, IdleTimeout: timeout})
	p.Take()
	p.Take() // two misses: level 1 → 3
	p.Fill()
	if s := p.State(); s.Idle != 3 || s.HeldBytes != 3<<20 {
		t.Fatalf("filled: %+v, want 3 idle holding 3 MiB", s)
	}
	clk.Advance(timeout - time.Millisecond)
	if n := p.Reduce(); n != 0 {
		t.Fatalf("Reduce before the timeout trimmed %d", n)
	}
	clk.Advance(time.Millisecond)
	if n := p.Reduce(); n != 2 {
		t.Fatalf("Reduce at the timeout trimmed %d, want 2 (keeping MinIdle 1)", n)
	}
	s := p.State()
	if s.Idle != 1 || s.Want != 1 || s.Reduced != 2 || len(st.live) != 1 {
		t.Fatalf("after reduce: %+v (live %d), want 1 idle, level 1, 2 reduced", s, len(st.live))
	}
	if s.HeldBytes != 1<<20 {
		t.Fatalf("memory held after reduce: %d, want 1 MiB freed down to 1 MiB", s.HeldBytes)
	}
	if n := p.Fill(); n != 0 {
		t.Fatalf("Fill after reduce re-added %d", n)
	}
	// The survivor keeps aging, but MinIdle is never trimmed.
	clk.Advance(time.Hour)
	if n := p.Reduce(); n != 0 {
		t.Fatalf("Reduce trimmed below MinIdle: %d", n)
	}
}

func TestPoolReduceOffAndPartial(t *testing.T) {
	p, clk, _ := newTestPool(Limits{MaxIdle: 2})
	p.Take()
	p.Take()
	p.Fill()
	clk.Advance(time.Hour)
	if n := p.Reduce(); n != 0 || p.State().Idle != 2 {
		t.Fatalf("reduce off trimmed %d", n)
	}

	// Only entries past the timeout go: one parked early, one late.
	p, clk, _ = newTestPool(Limits{MaxIdle: 2, IdleTimeout: time.Second})
	p.Take()
	p.Take() // two misses: level 2
	p.Fill() // entries 1 and 2 at t0
	clk.Advance(600 * time.Millisecond)
	p.Take() // hit: entry 2
	p.Fill() // entry 3 at t0+600ms
	clk.Advance(600 * time.Millisecond)
	if n := p.Reduce(); n != 1 {
		t.Fatalf("trimmed %d, want only the entry idle 1.2 s", n)
	}
	if e := p.Take(); e == nil || e.Pid() != 3 {
		t.Fatalf("survivor = %v, want the younger entry 3", e)
	}
}

// TestPoolMemoryMax: what the pool holds in reserve (parked, starting,
// coming back from an activation) stays under MemoryMax, MinIdle or not.
func TestPoolMemoryMax(t *testing.T) {
	p, _, st := newTestPool(Limits{MinIdle: 10, MemoryMax: 3<<20 + 1})
	if n := p.Fill(); n != 3 {
		t.Fatalf("Fill under a 3 MiB ceiling with 1 MiB entries added %d, want 3", n)
	}
	// The fourth was not started: the size of the last one says it would
	// not fit.
	if s := p.State(); st.starts != 3 || s.OverMemory != 0 || s.HeldBytes != 3<<20 {
		t.Fatalf("%d starts, %+v; want 3 starts, none let go, 3 MiB held", st.starts, s)
	}
	// Entries grow past the ceiling (parked Go runtimes do): reduce trims
	// the oldest until the pool is under it again.
	for _, ie := range p.idle {
		ie.e.(*fakeEntry).mem = 3 << 19
	}
	p.State() // measures them
	if n := p.Reduce(); n != 1 || len(st.live) != 2 || st.live[1] {
		t.Fatalf("Reduce over the ceiling trimmed %d (live %v), want the oldest (1)", n, st.live)
	}
	if s := p.State(); s.OverMemory != 1 || s.HeldBytes != 3<<20 || s.Reduced != 0 {
		t.Fatalf("after trimming: %+v; want 1 over memory, 3 MiB held", s)
	}

	// A ceiling below one entry: the first start shows the size, the entry
	// is let go, and no start follows.
	p, _, st = newTestPool(Limits{MinIdle: 2, MemoryMax: 1 << 19})
	p.Fill()
	p.Fill()
	if s := p.State(); st.starts != 1 || len(st.live) != 0 || s.Idle != 0 || s.OverMemory != 1 {
		t.Fatalf("ceiling below one entry: %d starts, %d live, %+v; want 1 start let go", st.starts, len(st.live), s)
	}
}

// TestPoolMemoryMaxReturn: a reused entry coming back is measured and not
// taken back past MemoryMax; entries starting count at the last size.
func TestPoolMemoryMaxReturn(t *testing.T) {
	p, _, _ := newTestPool(Limits{MinIdle: 2, MaxIdle: 3, Reuse: true, MemoryMax: 2<<20 + 1})
	p.Fill()
	e1, e2 := p.Take(), p.Take()
	if e1 == nil || e2 == nil || p.Take() != nil {
		t.Fatal("want two hits, then a miss")
	}
	if n := p.Fill(); n != 1 {
		t.Fatalf("Fill with two out added %d, want 1 (level 3)", n)
	}
	if !p.Return(e1, true) {
		t.Fatal("e1 (1 MiB) not taken back beside 1 MiB parked under a 2 MiB ceiling")
	}
	e2.(*fakeEntry).mem = 2 << 20 // it grew while active
	if p.Return(e2, true) {
		t.Fatal("e2 (2 MiB) taken back past the ceiling")
	}
	if s := p.State(); s.Reused != 1 || s.OverMemory != 1 || s.Idle != 2 || s.HeldBytes != 2<<20 {
		t.Fatalf("%+v; want 1 reused, 1 over memory, 2 MiB in 2 parked", s)
	}

	// An entry starting counts: one coming back while it starts does not
	// fit beside it.
	p, _, st := newTestPool(Limits{MinIdle: 1, MaxIdle: 2, Reuse: true, MemoryMax: 3 << 19})
	p.Fill()
	e := p.Take()
	p.Take() // a miss: level 2
	var back bool
	st.hook = func() { back = p.Return(e, true) }
	p.Fill()
	if s := p.State(); back || s.OverMemory != 1 || s.Idle != 1 {
		t.Fatalf("taken back %v while a 1 MiB entry started, under a 1.5 MiB ceiling: %+v", back, s)
	}
}

func TestPoolStartFailureAndDeath(t *testing.T) {
	p, _, st := newTestPool(Limits{MinIdle: 2})
	st.fail = true
	if n := p.Fill(); n != 0 || p.State().Failed != 1 || st.starts != 1 {
		t.Fatalf("failing start: added %d, %+v; want one attempt, no spin", n, p.State())
	}
	st.fail = false
	p.Fill()
	e := p.Take()
	if p.Remove(e) {
		t.Fatal("Remove of an activated entry reported it parked")
	}
	idle := p.State().Idle
	p.Fill()
	p.mu.Lock()
	victim := p.idle[0].e
	p.mu.Unlock()
	if !p.Remove(victim) || p.State().Died != 1 || p.State().Idle != idle {
		t.Fatalf("Remove of a dead parked entry: %+v", p.State())
	}
}

func TestPoolClose(t *testing.T) {
	p, _, st := newTestPool(Limits{MinIdle: 3})
	p.Fill()
	p.Close()
	if len(st.live) != 0 || p.Fill() != 0 {
		t.Fatalf("after Close: %d live, Fill still adds", len(st.live))
	}
}
