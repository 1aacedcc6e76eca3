package poold

import (
	"os"
	"sync"
	"time"

	"github.com/nvboot/nvboot/pool"
)

// Clock is the time idle entries age by; tests pass a fake one.
type Clock interface{ Now() time.Time }

// RealClock is the wall clock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }

// Entry is a parked process.
type Entry interface {
	Pid() int
	// Mem is the memory the entry holds while parked (bytes, PSS).
	Mem() int64
	// Activate hands the process its request; it then leaves the pool.
	Activate(m *pool.Msg, files []*os.File) error
	// Kill ends a parked process (reduce, reload, shutdown).
	Kill()
}

// Starter makes a parked process; Start returns once it is parked.
type Starter interface {
	Start() (Entry, error)
}

// Limits are the parts of a Program the pool logic needs.
type Limits struct {
	MinIdle, MaxIdle int
	IdleTimeout      time.Duration // 0: never reduce
	// MemoryMax bounds the memory the pool holds in reserve (0: none):
	// parked entries, entries starting (at the size of the last entry
	// measured) and reused entries coming back (Return). It wins over
	// MinIdle.
	MemoryMax int64
	// Reuse: taken entries may come back (Return); until they do, they
	// count towards the level, so a spawn does not make Fill start a
	// process the pool will not need.
	Reuse bool
}

// Pool is one program's parked processes and the add / reuse / reduce
// policy of Tender: keep Want parked (MinIdle at first), raise Want by one on
// each miss up to MaxIdle (add), hand out the newest parked entry (reuse),
// and trim entries idle past IdleTimeout down to MinIdle, lowering Want with
// them (reduce). Fill does the adding; poold runs it off the request path.
type Pool struct {
	lim   Limits
	clock Clock
	start Starter

	fillMu sync.Mutex // one Fill at a time: a second waits for the first

	mu       sync.Mutex
	idle     []idleEntry // oldest first
	starting int
	out      int // taken entries that may come back (Reuse)
	want     int
	closed   bool
	c        pool.Counters
	// lastMem is the size of the entry measured last: what an entry
	// starting will hold, for MemoryMax.
	lastMem int64
}

type idleEntry struct {
	e     Entry
	since time.Time
	// mem is e.Mem() when last measured (parking, Return, Fill, State):
	// MemoryMax is checked against these without reading /proc under mu.
	mem int64
}

// CountAsPeer counts a spawn served with the client's credentials.
func (p *Pool) CountAsPeer() {
	p.mu.Lock()
	p.c.AsPeer++
	p.mu.Unlock()
}

// NewPool makes an empty pool; call Fill to populate it.
func NewPool(lim Limits, clock Clock, start Starter) *Pool {
	lim.MaxIdle = max(lim.MaxIdle, lim.MinIdle)
	return &Pool{lim: lim, clock: clock, start: start, want: lim.MinIdle}
}

// Take hands out the most recently parked entry (its pages are the most
// likely still in cache), or nil on a miss, which raises the level Fill
// keeps by one.
func (p *Pool) Take() Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.idle); n > 0 {
		e := p.idle[n-1].e
		p.idle = p.idle[:n-1]
		p.c.Hits++
		if p.lim.Reuse {
			p.out++
		}
		return e
	}
	p.c.Misses++
	p.want = min(p.want+1, p.lim.MaxIdle)
	return nil
}

// Fill starts parked processes until the pool holds its level or its memory
// bound; it returns how many it added. Fill calls are serialised, so one
// returns with the pool at its level even while poold's filler runs.
func (p *Pool) Fill() int {
	p.fillMu.Lock()
	defer p.fillMu.Unlock()
	bounded := p.limits().MemoryMax > 0
	if bounded {
		p.refresh()
	}
	added := 0
	for {
		p.mu.Lock()
		if len(p.idle)+p.starting+p.out >= p.want || p.overMemory(p.lastMem) {
			p.mu.Unlock()
			return added
		}
		p.starting++
		p.mu.Unlock()
		e, err := p.start.Start()
		var mem int64
		if err == nil && bounded {
			mem = e.Mem()
		}
		p.mu.Lock()
		p.starting--
		if err != nil {
			p.c.Failed++
			p.mu.Unlock()
			return added
		}
		p.lastMem = mem
		if p.closed || p.overMemory(mem) {
			if !p.closed {
				p.c.OverMemory++
			}
			p.mu.Unlock()
			e.Kill()
			return added
		}
		p.idle = append(p.idle, idleEntry{e, p.clock.Now(), mem})
		p.c.Added++
		added++
		p.mu.Unlock()
	}
}

func (p *Pool) limits() Limits {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lim
}

// overMemory: one more entry holding mem would take what the pool holds in
// reserve past MemoryMax. Called with mu held.
func (p *Pool) overMemory(mem int64) bool {
	return p.lim.MemoryMax > 0 && p.reserved()+mem > p.lim.MemoryMax
}

// reserved is what the pool holds or is about to: its parked entries as
// last measured and its starting ones at the size of the last entry.
func (p *Pool) reserved() int64 {
	n := int64(p.starting) * p.lastMem
	for _, ie := range p.idle {
		n += ie.mem
	}
	return n
}

// refresh measures the parked entries again (outside mu: it reads /proc).
// Their proportional set sizes change as entries come and go and share
// more or fewer pages.
func (p *Pool) refresh() int64 {
	p.mu.Lock()
	entries := make([]Entry, len(p.idle))
	for i, ie := range p.idle {
		entries[i] = ie.e
	}
	p.mu.Unlock()
	mem := make(map[Entry]int64, len(entries))
	var total int64
	for _, e := range entries {
		mem[e] = e.Mem()
		total += mem[e]
	}
	p.mu.Lock()
	for i, ie := range p.idle {
		if m, ok := mem[ie.e]; ok {
			p.idle[i].mem = m
		}
	}
	p.mu.Unlock()
	return total
}

// Reduce kills the entries idle for IdleTimeout or longer, keeping MinIdle,
// then the oldest entries while the pool holds more than MemoryMax (as last
// measured), and returns how many it killed.
func (p *Pool) Reduce() int {
	if lim := p.limits(); lim.IdleTimeout <= 0 && lim.MemoryMax <= 0 {
		return 0
	}
	p.mu.Lock()
	now := p.clock.Now()
	var kill []Entry
	if p.lim.IdleTimeout > 0 {
		keep := p.idle[:0]
		for _, ie := range p.idle {
			if len(p.idle)-len(kill) > p.lim.MinIdle && now.Sub(ie.since) >= p.lim.IdleTimeout {
				kill = append(kill, ie.e)
				continue
			}
			keep = append(keep, ie)
		}
		clear(p.idle[len(keep):])
		p.idle = keep
		p.want = max(p.lim.MinIdle, p.want-len(kill))
		p.c.Reduced += uint64(len(kill))
	}
	over := 0
	for len(p.idle) > over && p.lim.MemoryMax > 0 && p.reserved() > p.lim.MemoryMax {
		kill = append(kill, p.idle[0].e)
		p.idle = p.idle[1:]
		over++
	}
	p.c.OverMemory += uint64(over)
	p.mu.Unlock()
	for _, e := range kill {
		e.Kill()
	}
	return len(kill)
}

// Return ends the loan of a taken entry in a Reuse pool: ok, it parked
// again and is idle once more (reuse), unless the pool is closed or holds
// MaxIdle already; it reports whether the pool took it back. The caller
// lets go of an entry not taken back, and refills when ok is false.
//
// With MemoryMax set, e is measured (its activation may have grown it) and
// not taken back if it would take the pool past the bound.
func (p *Pool) Return(e Entry, ok bool) bool {
	var mem int64
	if lim := p.limits(); ok && lim.Reuse && lim.MemoryMax > 0 {
		mem = e.Mem()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.lim.Reuse {
		return false
	}
	p.out = max(p.out-1, 0)
	if !ok || p.closed || len(p.idle) >= p.lim.MaxIdle {
		return false
	}
	if p.overMemory(mem) {
		p.c.OverMemory++
		return false
	}
	p.idle = append(p.idle, idleEntry{e, p.clock.Now(), mem})
	p.c.Reused++
	return true
}

// Remove drops e if it is parked here (it died while parked) and reports
// whether it was.
func (p *Pool) Remove(e Entry) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, ie := range p.idle {
		if ie.e == e {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			p.c.Died++
			return true
		}
	}
	return false
}

// Close kills every parked entry; the pool adds none afterwards.
func (p *Pool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.want, p.lim.MinIdle, p.lim.MaxIdle = 0, 0, 0
	p.closed = true
	p.mu.Unlock()
	for _, ie := range idle {
		ie.e.Kill()
	}
}

// State returns a snapshot; HeldBytes is measured now.
func (p *Pool) State() pool.PoolState {
	held := p.refresh()
	p.mu.Lock()
	defer p.mu.Unlock()
	return pool.PoolState{Idle: len(p.idle), Starting: p.starting, Want: p.want, HeldBytes: held, Counters: p.c}
}
