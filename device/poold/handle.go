package poold

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/pool"
)

// handle serves one client connection: requests one after another. A
// spawn's activation runs beside the loop, which meanwhile relays the
// client's signals to it; a client that keeps its connection (FlagKeepConn)
// sends its next request once it had the end (the Exited, or its end pipe's
// record), one spawn at a time.
func (s *Server) handle(c pool.Conn) {
	defer c.Close()
	if !s.clientOpen(c.UnixConn) {
		return
	}
	defer s.clientGone(c.UnixConn)
	cred, err := peerCred(c.UnixConn)
	if err != nil {
		s.opt.Log.Printf("client: %v", err)
		return
	}
	var cur *activation // the connection's spawn; nil: none yet
	for {
		m, files, err := c.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.opt.Log.Printf("client pid %d uid %d: %v", cred.Pid, cred.Uid, err)
			}
			return
		}
		if m.Type == pool.TypeSignal {
			closeFiles(files)
			// One for an activation that ended meanwhile is dropped
			// (proc.signal decides under the lock that ends it).
			if cur != nil && m.Signal > 0 && m.Signal < 65 {
				cur.p.signal(cur.ended, syscall.Signal(m.Signal))
			}
			continue
		}
		if cur != nil {
			// The client had the last end (it sends nothing else first);
			// poold is done with it just after: wait for that, so the
			// process is parked again before the next spawn is served.
			<-cur.ended
			cur = nil
		}
		if m.Type != pool.TypeSpawn {
			closeFiles(files) // only a spawn carries any
		}
		switch m.Type {
		case pool.TypeSpawn:
			cur = s.spawn(c, cred, m, files)
		case pool.TypeStats:
			s.stats(c)
		case pool.TypeReduce:
			_, admins := s.lookup("")
			if !allowed(admins, cred) {
				s.refuse(c, cred, "reduce")
				return
			}
			s.ReduceAll()
			c.Send(&pool.Msg{Type: pool.TypeOK}, nil)
		default:
			s.opt.Log.Printf("client pid %d uid %d: unexpected %v", cred.Pid, cred.Uid, m.Type)
			sendError(c, fmt.Sprintf("unexpected %v request", m.Type))
			return
		}
	}
}

// activation is a spawn in progress on a connection.
type activation struct {
	p     *proc
	ended chan struct{} // closed once its end was handled (Exited sent, or not needed)
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

func sendError(c pool.Conn, text string) {
	c.Send(&pool.Msg{Type: pool.TypeError, Name: text}, nil)
}

// refuse logs and answers a request the peer may not make.
func (s *Server) refuse(c pool.Conn, cred *syscall.Ucred, what string) {
	s.opt.Log.Printf("refused: pid %d uid %d gid %d may not %s", cred.Pid, cred.Uid, cred.Gid, what)
	sendError(c, fmt.Sprintf("permission denied: uid %d may not %s (see Allow in poold's config)", cred.Uid, what))
}

func (s *Server) stats(c pool.Conn) {
	b, err := jsonMarshal(s.Stats())
	if err != nil {
		sendError(c, err.Error())
		return
	}
	c.Send(&pool.Msg{Type: pool.TypeStatsReply, Data: b}, nil)
}

// spawn activates a parked process (or, on a miss, one started now) with the
// client's request and tells the client its pid; its exit is reported when
// it comes. nil: the spawn failed and the client was told why.
func (s *Server) spawn(c pool.Conn, cred *syscall.Ucred, m *pool.Msg, files []*os.File) *activation {
	defer closeFiles(files)
	t0 := time.Now()
	pr, admins := s.lookup(m.Name)
	if pr == nil {
		s.opt.Log.Printf("spawn by pid %d uid %d: no program %q", cred.Pid, cred.Uid, m.Name)
		sendError(c, fmt.Sprintf("no program %q in poold's config", m.Name))
		return nil
	}
	if !allowed(pr.allow, cred) && !allowed(admins, cred) {
		s.refuse(c, cred, "spawn "+m.Name)
		return nil
	}
	if len(m.Argv) == 0 {
		m.Argv = append([]string{pr.cfg.Path}, pr.cfg.Args...)
	}
	// The end of the activation is reported from where it is learnt (the
	// reaper, or the watcher of a reusable process): no further goroutine
	// between it and the client. started orders it after Started.
	started, ended := make(chan struct{}), make(chan struct{})
	var handed *proc // the process the client got; set before started closes
	owner := func(p *proc, e ending) {
		<-started
		if p != handed {
			// A parked process whose activation failed (it died), reaped
			// before activate took the owner back: its end is nobody's.
			return
		}
		pr.mu.Lock()
		pr.active--
		pr.mu.Unlock()
		switch {
		case e.done != nil && !pr.cfg.Reuses():
			// MaxUses 1: it exits by itself, and its place is refilled
			// after the client heard (see below).
			sendExited(c, e.done)
			s.giveBack(pr, p, true)
		case e.done != nil:
			// Parked again before the client's next spawn on this
			// connection is served (handle waits for ended): it finds
			// this process.
			s.giveBack(pr, p, true)
			sendExited(c, e.done)
		case p.taken && p.reuse:
			s.giveBack(pr, p, false) // its place is free before the client hears
			c.Send(exitedMsg(e.ps), nil)
		default:
			c.Send(exitedMsg(e.ps), nil)
			// add: replace what was taken once the activation is over.
			// Refilling as soon as the client has its pid runs a fork and
			// exec beside the very request it replaces: on a 2-core
			// machine, about 400 µs of its spawn-to-exit.
			pr.kickFill()
		}
		// Idle again before ended lets the loop serve the next request
		// (which marks it busy); a connection the client or Close already
		// closed is not recorded again.
		if m.Flags&pool.FlagKeepConn == 0 || !s.clientIdle(c.UnixConn, true) {
			// Closed here, not by handle's return: the Exited sent is
			// still delivered, and the connection is gone by the time
			// the client has its answer.
			c.Close()
		}
		close(ended)
	}
	if !s.clientIdle(c.UnixConn, false) {
		close(started)
		sendError(c, "poold is shutting down")
		return nil
	}
	p, hit, err := s.activate(pr, c, cred, m, files, owner, ended)
	// The process has its copies: ours go now, not when the activation
	// ends (the client may count its descriptors, or wait for a pipe's
	// end of file, as soon as it has the exit).
	closeFiles(files)
	if err != nil {
		close(started) // owners of failed attempts return
		s.clientIdle(c.UnixConn, true)
		s.opt.Log.Printf("spawn %s for pid %d: %v", m.Name, cred.Pid, err)
		sendError(c, err.Error())
		return nil
	}
	handed = p
	pr.mu.Lock()
	pr.active++
	pr.mu.Unlock()
	lat := time.Since(t0)
	s.hist.Add(lat)
	if hit {
		pr.hits.Add(lat)
	} else {
		pr.misses.Add(lat)
	}
	var flags int64
	if hit {
		flags = pool.FlagHit
	}
	// A client gone by now changes nothing: the process runs, is reaped,
	// and its status is dropped.
	c.Send(&pool.Msg{Type: pool.TypeStarted, Pid: int64(p.pid), Flags: flags}, nil)
	close(started)
	return &activation{p: p, ended: ended}
}

// giveBack ends a taken process's activation in its pool. One that parked
// again is idle once more unless it served MaxUses, was signalled during
// the activation (a signal may yet kill it), or the pool is full or closed:
// then it is let go. One that exited leaves a place to refill.
func (s *Server) giveBack(pr *program, p *proc, parked bool) {
	signalled := !p.reusable()
	keep := parked && p.uses < pr.cfg.MaxUses && !signalled
	if parked && !keep {
		s.retire(p)
		if signalled {
			// Its main returned; a signal that stopped it would keep it
			// from ever reading the end of file retire gives it.
			p.p.Kill()
		}
	}
	if !pr.pool.Return(p, keep) && keep {
		s.retire(p)
	}
	if !keep {
		pr.kickFill()
	}
}

// activate hands the request to a parked process, trying the next one if a
// parked process died meanwhile; with none parked it starts the program
// directly with the request (a miss costs what os/exec costs). A peer the
// pool's processes may not serve (procStarter.forPeer) gets a process
// started with its own credentials.
func (s *Server) activate(pr *program, c pool.Conn, peer *syscall.Ucred, m *pool.Msg, files []*os.File, owner func(*proc, ending), act chan struct{}) (*proc, bool, error) {
	m.Env = withoutPoolEnv(m.Env)
	// The client's end pipe goes to a parked process only: one started
	// directly is reported from here.
	var end *os.File
	if m.Flags&pool.FlagEndPipe != 0 && len(files) > 0 {
		files, end = files[:len(files)-1], files[len(files)-1]
	}
	m.Flags &^= pool.FlagEndPipe
	cred, secure := pr.starter.forPeer(peer)
	if cred != nil {
		cred.Groups = peerGroups(c.UnixConn)
		pr.pool.CountAsPeer()
		p, err := pr.starter.direct(m, files, owner, act, cred)
		if err != nil {
			err = fmt.Errorf("%w (as uid %d gid %d, the client's: the program has no User)", err, cred.Uid, cred.Gid)
		}
		return p, false, err
	}
	if secure {
		m.Env = secureEnv(m.Env)
	}
	for {
		e := pr.pool.Take()
		if e == nil {
			p, err := pr.starter.direct(m, files, owner, act, pr.starter.cred)
			return p, false, err
		}
		p := e.(*proc)
		p.taken = true
		p.setOwner(owner, act)
		pfiles := files
		if end != nil && p.reuse { // only a process that reports its return writes it
			pfiles = append(append([]*os.File(nil), files...), end)
			m.Flags |= pool.FlagEndPipe
		}
		err := p.Activate(m, pfiles)
		m.Flags &^= pool.FlagEndPipe
		if err == nil {
			return p, true, nil
		}
		p.setOwner(nil, nil)
		p.abandon()
		if p.reuse {
			pr.pool.Return(p, false)
		}
		s.opt.Log.Printf("%s: activating pid %d: %v", pr.cfg.Name, p.pid, err)
	}
}

// sendExited reports a Done to the client, unless the process reported it
// on the client's end pipe itself.
func sendExited(c pool.Conn, done *pool.Msg) {
	if done.Flags&pool.FlagReported == 0 {
		c.Send(&pool.Msg{Type: pool.TypeExited, Usage: done.Usage}, nil)
	}
}

func exitedMsg(ps *os.ProcessState) *pool.Msg {
	m := &pool.Msg{Type: pool.TypeExited}
	if ps == nil {
		return m
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		m.Status = int64(ws)
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok && ru != nil {
		m.Usage = pool.Usage{
			UserMicros:   ru.Utime.Sec*1e6 + ru.Utime.Usec,
			SystemMicros: ru.Stime.Sec*1e6 + ru.Stime.Usec,
			MaxRSSKiB:    ru.Maxrss,
			MinorFaults:  ru.Minflt,
			MajorFaults:  ru.Majflt,
		}
	}
	return m
}

// retire lets a reused process go; Close waits until it was reaped.
func (s *Server) retire(p *proc) {
	s.mu.Lock()
	s.retiring[p] = true
	s.mu.Unlock()
	p.retire()
	go func() {
		<-p.reaped
		s.mu.Lock()
		delete(s.retiring, p)
		s.mu.Unlock()
	}()
}
