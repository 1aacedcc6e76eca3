package poold

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/pool"
)

// handle serves one client connection: one request, and for a spawn the
// signals the client sends until its process exits.
func (s *Server) handle(c pool.Conn) {
	defer c.Close()
	cred, err := peerCred(c.UnixConn)
	if err != nil {
		s.opt.Log.Printf("client: %v", err)
		return
	}
	m, files, err := c.Recv()
	if err != nil {
		if !errors.Is(err, io.EOF) {
			s.opt.Log.Printf("client pid %d uid %d: %v", cred.Pid, cred.Uid, err)
		}
		return
	}
	defer closeFiles(files)
	switch m.Type {
	case pool.TypeSpawn:
		s.spawn(c, cred, m, files)
	case pool.TypeStats:
		s.stats(c)
	case pool.TypeReduce:
		_, cfg := s.lookup("")
		if !allowed(cfg.AdminsOrDefault(), cred) {
			s.refuse(c, cred, "reduce")
			return
		}
		s.ReduceAll()
		c.Send(&pool.Msg{Type: pool.TypeOK}, nil)
	default:
		s.opt.Log.Printf("client pid %d uid %d: unexpected %v", cred.Pid, cred.Uid, m.Type)
		sendError(c, fmt.Sprintf("unexpected %v request", m.Type))
	}
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
// client's request, tells the client its pid, and reports its exit.
func (s *Server) spawn(c pool.Conn, cred *syscall.Ucred, m *pool.Msg, files []*os.File) {
	t0 := time.Now()
	pr, cfg := s.lookup(m.Name)
	if pr == nil {
		s.opt.Log.Printf("spawn by pid %d uid %d: no program %q", cred.Pid, cred.Uid, m.Name)
		sendError(c, fmt.Sprintf("no program %q in poold's config", m.Name))
		return
	}
	if !allowed(pr.cfg.Allow, cred) && !allowed(cfg.AdminsOrDefault(), cred) {
		s.refuse(c, cred, "spawn "+m.Name)
		return
	}
	if len(m.Argv) == 0 {
		m.Argv = append([]string{pr.cfg.Path}, pr.cfg.Args...)
	}
	// The end of the activation is reported from where it is learnt (the
	// reaper, or the watcher of a reusable process): no further goroutine
	// between it and the client. started orders it after Started.
	started, ended := make(chan struct{}), make(chan struct{})
	owner := func(p *proc, e ending) {
		<-started
		pr.mu.Lock()
		pr.active--
		pr.mu.Unlock()
		switch {
		case e.done != nil:
			// Parked again before the client hears: its next spawn finds
			// this process.
			s.giveBack(pr, p, true)
			c.Send(&pool.Msg{Type: pool.TypeExited, Usage: e.done.Usage}, nil)
		case p.taken && p.reuse:
			s.giveBack(pr, p, false) // its place is free before the client hears
			c.Send(exitedMsg(e.ps), nil)
		default:
			c.Send(exitedMsg(e.ps), nil)
			// add: replace what was taken once the activation is over.
			// Refilling as soon as the client had its pid (as before) ran
			// a fork and exec beside the very request it replaced, on this
			// 2-core machine about 400 µs of its spawn-to-exit.
			pr.kickFill()
		}
		close(ended)
		// Closed here, not by handle's return: the Exited sent is still
		// delivered, and the connection is gone by the time the client
		// has its answer (also ends relaySignals' Recv).
		c.Close()
	}
	p, hit, err := s.activate(pr, m, files, owner, ended)
	// The process has its copies: ours go now, not when the activation
	// ends (the client may count its descriptors, or wait for a pipe's
	// end of file, as soon as it has the exit).
	closeFiles(files)
	if err != nil {
		s.opt.Log.Printf("spawn %s for pid %d: %v", m.Name, cred.Pid, err)
		sendError(c, err.Error())
		return
	}
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
	s.relaySignals(c, p, ended)
	<-ended
}

// giveBack ends a taken process's activation in its pool: one that parked
// again (ok) is idle once more unless it served MaxUses or the pool is full
// or closed, then it is let go; one that exited leaves a place to refill.
func (s *Server) giveBack(pr *program, p *proc, ok bool) {
	if ok && p.uses >= pr.cfg.MaxUses {
		ok = false
		s.retire(p)
	}
	if !pr.pool.Return(p, ok) && ok {
		s.retire(p)
	}
	if !ok {
		pr.kickFill()
	}
}

// activate hands the request to a parked process, trying the next one if a
// parked process died meanwhile; with none parked it starts the program
// directly with the request (a miss costs what os/exec costs).
func (s *Server) activate(pr *program, m *pool.Msg, files []*os.File, owner func(*proc, ending), act chan struct{}) (*proc, bool, error) {
	for {
		e := pr.pool.Take()
		if e == nil {
			p, err := pr.starter.direct(m, files, owner, act)
			return p, false, err
		}
		p := e.(*proc)
		p.taken = true
		p.setOwner(owner, act)
		err := p.Activate(m, files)
		if err == nil {
			return p, true, nil
		}
		p.setOwner(nil, nil)
		p.Kill()
		if p.reuse {
			pr.pool.Return(p, false)
		}
		s.opt.Log.Printf("%s: activating pid %d: %v", pr.cfg.Name, p.pid, err)
	}
}

// relaySignals forwards the client's Signal messages until the client hangs
// up or the activation ends (the connection is then shut down under it). A
// reused process is signalled only while this activation lasts (proc.signal
// decides that under the lock that ends it).
func (s *Server) relaySignals(c pool.Conn, p *proc, ended chan struct{}) {
	for {
		m, files, err := c.Recv()
		if err != nil {
			return
		}
		closeFiles(files)
		select {
		case <-ended:
			return
		default:
		}
		if m.Type == pool.TypeSignal && m.Signal > 0 && m.Signal < 65 {
			p.signal(ended, syscall.Signal(m.Signal))
		}
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
