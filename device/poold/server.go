package poold

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/pool"
)

// Options are what a Server takes besides its config.
type Options struct {
	Clock Clock       // nil: RealClock
	Log   *log.Logger // nil: discard
	// Self is the binary that parks on behalf of Exec programs; it must
	// import pool. Empty: /proc/self/exe.
	Self string
	// NoTicker: reduce only when asked (tests drive it with a fake clock).
	NoTicker bool
	// ManualFill: pools are filled only by Server.Fill (tests that count
	// hits and misses of a burst).
	ManualFill bool
}

// Server is a running poold.
type Server struct {
	opt Options

	mu       sync.Mutex
	cfg      *contract.PooldConfig
	admins   []peerRule // cfg's Admins, resolved
	programs map[string]*program
	closed   bool
	wg       sync.WaitGroup // fillers
	retiring map[*proc]bool // reused processes let go, until reaped
	hist     Histogram
	conns    atomic.Uint64 // client connections accepted
	// clients are the open client connections, true while no activation
	// runs on them: Close closes those, an activation's end the others.
	clients map[*net.UnixConn]bool
}

// program is one configured pool and what runs it.
type program struct {
	cfg     contract.Program
	allow   []peerRule // cfg's Allow, resolved
	pool    *Pool
	starter *procStarter
	kick    chan struct{}
	done    chan struct{}
	cgroup  *os.File

	mu     sync.Mutex
	active int
	hits   Histogram
	misses Histogram
}

// New makes a server and starts filling its pools.
func New(cfg *contract.PooldConfig, opt Options) (*Server, error) {
	if opt.Clock == nil {
		opt.Clock = RealClock{}
	}
	if opt.Log == nil {
		opt.Log = log.New(io.Discard, "", 0)
	}
	if opt.Self == "" {
		opt.Self = "/proc/self/exe"
	}
	s := &Server{opt: opt, programs: map[string]*program{}, retiring: map[*proc]bool{}}
	if err := s.Reload(cfg); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Reload applies a new config: pools whose program config is unchanged keep
// their parked processes; the others are closed (parked processes killed,
// activated ones left running and still reported) and made anew. A program
// whose new pool cannot be made (its Path is not an executable file, its
// cgroup, its user) keeps its old pool, if it had one, and is named in the
// error.
func (s *Server) Reload(cfg *contract.PooldConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	peers, err := resolve(cfg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("poold is shut down")
	}
	next := map[string]*program{}
	var errs []error
	for i, pc := range cfg.Programs {
		if err := CheckExecutable(pc.Path); err != nil {
			// Checked now, not when a process is first started for it.
			errs = append(errs, fmt.Errorf("program %s: Path %s: %w", pc.Name, pc.Path, err))
			if old := s.programs[pc.Name]; old != nil {
				next[pc.Name] = old
				delete(s.programs, pc.Name)
			}
			continue
		}
		if old := s.programs[pc.Name]; old != nil && reflect.DeepEqual(old.cfg, pc) && reflect.DeepEqual(old.allow, peers.allow[i]) {
			next[pc.Name] = old
			delete(s.programs, pc.Name)
			continue
		}
		pr, err := s.newProgram(pc, peers.allow[i])
		if err != nil {
			// What ran goes on running: a reload that cannot apply a
			// program's new config leaves its pool as it was.
			errs = append(errs, err)
			if old := s.programs[pc.Name]; old != nil {
				next[pc.Name] = old
				delete(s.programs, pc.Name)
			}
			continue
		}
		next[pc.Name] = pr
	}
	for _, old := range s.programs {
		old.close()
	}
	s.programs, s.cfg, s.admins = next, cfg, peers.admins
	return errors.Join(errs...)
}

func (s *Server) newProgram(pc contract.Program, allow []peerRule) (*program, error) {
	pr := &program{cfg: pc, allow: allow, kick: make(chan struct{}, 1), done: make(chan struct{})}
	st := &procStarter{prog: pc, self: s.opt.Self, cgroupFD: -1,
		runAs: credential{uint32(os.Geteuid()), uint32(os.Getegid())}}
	if pc.User != "" {
		c, err := lookupUser(pc.User)
		if err != nil {
			return nil, fmt.Errorf("program %s: User: %w", pc.Name, err)
		}
		st.cred = &syscall.Credential{Uid: c.uid, Gid: c.gid, NoSetGroups: false}
		st.runAs, st.granted = c, true
	}
	if pc.Cgroup != "" {
		warn := func(format string, args ...any) {
			s.opt.Log.Printf("program %s: "+format, append([]any{pc.Name}, args...)...)
		}
		f, err := openCgroup(pc.Cgroup, pc.CgroupMemoryMax, warn)
		if err != nil {
			return nil, fmt.Errorf("program %s: %w", pc.Name, err)
		}
		pr.cgroup = f
		st.cgroupFD = int(f.Fd())
	}
	st.exited = func(p *proc, ps *os.ProcessState) { s.exited(pr, p, ps) }
	pr.starter = st
	pr.pool = NewPool(Limits{MinIdle: pc.MinIdle, MaxIdle: pc.MaxIdleOrDefault(),
		IdleTimeout: pc.IdleTimeoutOrZero(), MemoryMax: pc.MemoryMax, Reuse: pc.Reuses()}, s.opt.Clock, st)
	if !s.opt.ManualFill {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			pr.fillLoop()
		}()
		pr.kickFill()
	}
	return pr, nil
}

func (pr *program) fillLoop() {
	for {
		select {
		case <-pr.kick:
			pr.pool.Fill()
		case <-pr.done:
			return
		}
	}
}

func (pr *program) kickFill() {
	select {
	case pr.kick <- struct{}{}:
	default:
	}
}

func (pr *program) close() {
	close(pr.done)
	pr.pool.Close()
	if pr.cgroup != nil {
		pr.cgroup.Close()
	}
}

// exited is where every process of pr ends up once reaped.
func (s *Server) exited(pr *program, p *proc, ps *os.ProcessState) {
	if p.park.UnixConn != nil {
		// Also ends a watch still reading it: the process is gone.
		defer p.park.Close()
	}
	if owner := p.takeOwner(); owner != nil {
		owner(p, ending{ps: ps})
		return
	}
	if pr.pool.Remove(p) {
		s.opt.Log.Printf("%s: parked pid %d died (%v); replacing it", pr.cfg.Name, p.pid, ps)
		pr.kickFill()
	}
}

// Serve accepts clients on ln until ctx ends or ln fails, reducing every
// ReduceTick.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	if !s.opt.NoTicker {
		t := time.NewTicker(s.reduceTick())
		defer t.Stop()
		go func() {
			for {
				select {
				case <-t.C:
					s.ReduceAll()
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	// Connections outlive Serve: a spawned process is still reaped and
	// reported to its client after poold stops accepting.
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accepting on %s: %w", ln.Addr(), err)
		}
		s.conns.Add(1)
		go s.handle(pool.Conn{UnixConn: c})
	}
}

func (s *Server) reduceTick() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.ReduceTickOrDefault()
}

// ReduceAll reduces every pool now and returns how many processes it trimmed.
func (s *Server) ReduceAll() int {
	n := 0
	for _, pr := range s.snapshot() {
		n += pr.pool.Reduce()
	}
	return n
}

// Fill fills every pool now (tests: a pool at its level, without waiting on
// the filler goroutines).
func (s *Server) Fill() {
	for _, pr := range s.snapshot() {
		pr.pool.Fill()
	}
}

func (s *Server) snapshot() []*program {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*program, 0, len(s.programs))
	for _, pr := range s.programs {
		out = append(out, pr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].cfg.Name < out[j].cfg.Name })
	return out
}

// lookup returns the program called name (nil: none) and the admins.
func (s *Server) lookup(name string) (*program, []peerRule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.programs[name], s.admins
}

// Stats returns a snapshot of every pool.
func (s *Server) Stats() pool.Stats {
	st := pool.Stats{SpawnLatency: s.hist.Buckets(), Connections: s.conns.Load()}
	for _, pr := range s.snapshot() {
		pr.mu.Lock()
		active := pr.active
		pr.mu.Unlock()
		ps := pool.ProgramStats{Name: pr.cfg.Name, Active: active, PoolState: pr.pool.State(),
			HitLatency: pr.hits.Buckets(), MissLatency: pr.misses.Buckets()}
		st.HeldBytes += ps.HeldBytes
		st.Programs = append(st.Programs, ps)
	}
	return st
}

// clientOpen records a new client connection, idle; false: the server is
// closed, the caller closes c.
func (s *Server) clientOpen(c *net.UnixConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.clients == nil {
		s.clients = map[*net.UnixConn]bool{}
	}
	s.clients[c] = true
	return true
}

// clientIdle records whether an activation runs on client connection c;
// false: the server is closed or c is gone (its handler returned), and the
// caller closes c.
func (s *Server) clientIdle(c *net.UnixConn, idle bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clients[c]; !ok || s.closed {
		return false
	}
	s.clients[c] = idle
	return true
}

func (s *Server) clientGone(c *net.UnixConn) {
	s.mu.Lock()
	delete(s.clients, c)
	s.mu.Unlock()
}

// Close kills every parked process, stops the fillers and waits for the
// reused processes it let go to be reaped; activated processes keep running
// and are still reaped and reported.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for c, idle := range s.clients {
		if idle { // kept by a client between spawns
			c.Close()
		}
	}
	for _, pr := range s.programs {
		pr.close()
	}
	s.programs = map[string]*program{}
	var retiring []*proc
	for p := range s.retiring {
		retiring = append(retiring, p)
	}
	s.mu.Unlock()
	s.wg.Wait()
	for _, p := range retiring {
		<-p.reaped
	}
}
