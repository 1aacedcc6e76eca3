package poold

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/pool"
)

// startTimeout bounds how long a new process may take to park.
const startTimeout = 30 * time.Second

// procStarter starts parked processes of one program.
type procStarter struct {
	prog     contract.Program
	self     string // the binary that parks for Exec programs
	cgroupFD int    // -1: none
	cred     *syscall.Credential
	// runAs is who the pool's processes run as: User, or poold's own
	// effective uid and gid. granted: User is set, so they serve every
	// allowed peer as runAs.
	runAs   credential
	granted bool
	// exited is called from the reaping goroutine of every process it
	// started, after the process was reaped.
	exited func(*proc, *os.ProcessState)
}

// ending is how an activation ended: the process exited (ps), or, for a
// reusable process, its main returned and it parked again (done).
type ending struct {
	ps   *os.ProcessState
	done *pool.Msg
}

// proc is a process poold started: parked, then activated.
type proc struct {
	pid  int
	p    *os.Process
	park pool.Conn
	mem  int64
	// reuse: the process reports its main's return (MaxUses ≥ 1), so its
	// pool socket stays open through an activation and may bring a Done,
	// after which it parks again or (its uses spent) exits. uses counts the
	// activations it served; taken: it came out of the pool (not a miss's
	// direct start) and goes back to it, or is accounted for, at the end.
	reuse bool
	uses  int
	taken bool

	reaped chan struct{} // closed once the process was waited for and its exit handled

	mu    sync.Mutex
	owner func(*proc, ending) // set once activated: where its end goes
	// act identifies the activation owner belongs to (its spawn's ended
	// channel): a signal is delivered only while that activation lasts.
	act chan struct{}
	// signalled: a client's signal was delivered during this activation.
	signalled bool
}

func (p *proc) Pid() int { return p.pid }

// Mem reads the PSS now: it falls as more entries share the program's pages.
func (p *proc) Mem() int64 {
	if m := memOf(p.pid); m > 0 {
		return m
	}
	return p.mem
}

// Start forks and execs the program (or the parking binary for Exec
// programs) with the parking socket at fd 3, sets it to SCHED_IDLE (see
// sched.go: preparation takes only idle CPU), and waits until it parked.
func (s *procStarter) Start() (Entry, error) {
	p, err := s.start(false, s.cred)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// start starts a process that parks, with credentials cred. miss: a spawn
// waits for it (direct), so it is not demoted to SCHED_IDLE, does not
// prefault and is not offered reuse, as a process started straight with
// the request would not be.
func (s *procStarter) start(miss bool, cred *syscall.Credential) (*proc, error) {
	a, b, err := pool.Socketpair()
	if err != nil {
		return nil, err
	}
	defer b.Close()
	conn, err := pool.FileConn(a)
	a.Close()
	if err != nil {
		return nil, err
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		conn.Close()
		return nil, err
	}
	defer null.Close()
	env := append(append([]string(nil), s.prog.Env...), pool.EnvFD+"=3")
	path := s.prog.Path
	if s.prog.Exec {
		env = append(env, pool.EnvExec+"="+s.prog.Path)
		path = s.self
	}
	if s.prog.Prefault && !miss {
		env = append(env, pool.EnvPrefault+"=1")
	}
	reuse := s.prog.ReportsReturn() && !miss
	if reuse {
		env = append(env, fmt.Sprintf("%s=%d", pool.EnvReuse, s.prog.MaxUses))
	}
	if len(s.prog.Rlimits) > 0 {
		env = append(env, pool.EnvRlimits+"=1")
	}
	sys := &syscall.SysProcAttr{Credential: cred, Setsid: true}
	if s.cgroupFD >= 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, s.cgroupFD
	}
	// Descriptors 4..MaxFiles-1 are placeholders, so what the program's
	// runtime opens before activation (Go keeps cgroup CPU files open) lands
	// above the slots activation fills.
	files := []*os.File{null, null, null, b}
	for len(files) < pool.MaxFiles {
		files = append(files, null)
	}
	env = append(env, fmt.Sprintf("%s=%d", pool.EnvReserved, pool.MaxFiles))
	argv := append([]string{s.prog.Path}, s.prog.Args...)
	attr := &os.ProcAttr{Dir: "/", Env: env, Files: files, Sys: sys}
	var p *os.Process
	fork := func() (int, error) {
		var err error
		if p, err = os.StartProcess(path, argv, attr); err != nil {
			return 0, err
		}
		return p.Pid, nil
	}
	if miss {
		_, err = fork()
	} else {
		err = startIdle(fork)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("starting %s: %w", s.prog.Name, err)
	}
	pr := &proc{pid: p.Pid, p: p, park: conn, reaped: make(chan struct{}), reuse: reuse}
	go func() {
		st, _ := p.Wait()
		s.exited(pr, st)
		close(pr.reaped)
	}()
	if err := s.awaitReady(pr, !miss); err != nil {
		pr.Kill()
		return nil, fmt.Errorf("starting %s: %w", s.prog.Name, err)
	}
	return pr, nil
}

// direct starts the program straight with a request, as os/exec would,
// for a spawn that found no parked process: waiting for a new process to
// park and then activating it would cost more than this.
//
// Unless the program has Rlimits: os.StartProcess cannot set limits
// between fork and exec, and setting them on the running program (as
// before) raced with it and could not fail the spawn. Such a miss is
// started as a parked process (for an Exec program, the parking binary),
// gets its limits while parked, and is activated with the request: main,
// or an Exec program from its first instruction, runs under them, and a
// limit that cannot be set fails the spawn. (An Exec program that cannot
// be exec'd is then exit status 127 with the reason on its stderr, as on
// a hit.)
//
// cred: the credentials it runs with (the pool's, or the peer's: see
// forPeer).
func (s *procStarter) direct(m *pool.Msg, files []*os.File, owner func(*proc, ending), act chan struct{}, cred *syscall.Credential) (*proc, error) {
	if len(s.prog.Rlimits) > 0 {
		pr, err := s.start(true, cred)
		if err != nil {
			return nil, err
		}
		pr.setOwner(owner, act)
		if err := pr.Activate(m, files); err != nil {
			pr.setOwner(nil, nil)
			pr.abandon()
			return nil, fmt.Errorf("starting %s: %w", s.prog.Name, err)
		}
		return pr, nil
	}
	if len(files) < 3 {
		// A client that sent fewer than three (pool.Client never does):
		// /dev/null, as a parked process has in those slots, not closed
		// descriptors the program's first open would take.
		null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", s.prog.Name, err)
		}
		defer null.Close()
		files = append(files[:len(files):len(files)], null, null, null)[:3]
	}
	sys := &syscall.SysProcAttr{Credential: cred, Setsid: true}
	if s.cgroupFD >= 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, s.cgroupFD
	}
	p, err := os.StartProcess(s.prog.Path, m.Argv, &os.ProcAttr{Dir: m.Dir, Env: m.Env, Files: files, Sys: sys})
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", s.prog.Name, err)
	}
	pr := &proc{pid: p.Pid, p: p, reaped: make(chan struct{}), owner: owner, act: act}
	go func() {
		st, _ := p.Wait()
		s.exited(pr, st)
		close(pr.reaped)
	}()
	return pr, nil
}

// awaitReady sets the program's limits on a process just started and waits
// until it parked; idle: it was demoted to SCHED_IDLE, and is put back.
// forPeer says how a spawn by peer is served. Without User (no grant), a
// peer that is not who the pool's processes run as gets a process started
// with its own uid, gid and groups (cred, non-nil; groups are filled in by
// the caller), never the pool's: a peer gets no more privilege through
// poold than it has. secure: the process runs with credentials other than
// the peer's, so the environment the peer gives is cleaned (secureEnv).
func (s *procStarter) forPeer(peer *syscall.Ucred) (cred *syscall.Credential, secure bool) {
	same := peer.Uid == s.runAs.uid && peer.Gid == s.runAs.gid
	if s.granted || same {
		return nil, !same
	}
	return &syscall.Credential{Uid: peer.Uid, Gid: peer.Gid}, false
}

func (s *procStarter) awaitReady(pr *proc, idle bool) error {
	if err := setRlimits(pr.pid, s.prog.Rlimits); err != nil {
		return err
	}
	pr.park.SetReadDeadline(time.Now().Add(startTimeout))
	m, files, err := pr.park.Recv()
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("waiting for pid %d to park (does %s import github.com/nvboot/nvboot/pool? else set Exec): %w",
			pr.pid, s.prog.Path, err)
	}
	if m.Type != pool.TypeReady {
		return fmt.Errorf("pid %d: expected ready, got %v", pr.pid, m.Type)
	}
	pr.park.SetReadDeadline(time.Time{})
	if idle {
		unidle(pr.pid)
	}
	pr.mem = memOf(pr.pid)
	return nil
}

// Activate sends the request. The parking socket is closed, unless the
// process may be reused: then it is watched for the Done that says main
// returned and the process parked again.
func (p *proc) Activate(m *pool.Msg, files []*os.File) error {
	m.Type = pool.TypeActivate
	err := p.park.Send(m, files)
	if !p.reuse || err != nil {
		p.park.Close()
		return err
	}
	p.uses++
	go p.watch()
	return nil
}

// watch waits for the end of a reusable process's activation on its pool
// socket. End of file means the process is exiting (it did not declare
// itself reusable, or called os.Exit, or died): its reaper reports it.
func (p *proc) watch() {
	m, files, err := p.park.Recv()
	closeFiles(files)
	if err != nil {
		p.park.Close()
		return
	}
	if m.Type != pool.TypeDone {
		p.park.Close()
		p.p.Kill() // it speaks nonsense: its exit is reported
		return
	}
	if owner := p.takeOwner(); owner != nil {
		owner(p, ending{done: m})
		return
	}
	// Its exit was reaped first and ended the activation (it died right
	// after its Done; one whose uses are spent waits for us to let go).
	p.park.Close()
}

// retire lets a parked process go: it sees end of file on its pool socket
// and exits; its reaper collects it.
func (p *proc) retire() {
	if p.park.UnixConn != nil {
		p.park.Close()
	}
}

// setOwner routes the end of activation act; nil takes it back
// (activation failed).
func (p *proc) setOwner(f func(*proc, ending), act chan struct{}) {
	p.mu.Lock()
	p.owner, p.act, p.signalled = f, act, false
	p.mu.Unlock()
}

// signal sends sig if activation act still owns the process, and reports
// whether it did. A reused process serves one activation after another:
// checking that act ended and then signalling would let a signal sent
// just as act ended reach the process's next activation, another client's
// request. Under mu, the end cannot be taken (takeOwner) between
// the check and the kill; a signal that arrives while main has returned
// but poold has not yet heard the Done still belongs to act, whose end the
// signal then decides.
func (p *proc) signal(act chan struct{}, sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.owner == nil || p.act != act {
		return false
	}
	p.p.Signal(sig)
	// Its main may have returned already (the client may have its end by
	// the end pipe): a process a signal may yet kill is not parked again.
	p.signalled = true
	return true
}

// reusable reports whether the activation that just ended left the process
// fit to park again: no signal was sent to it meanwhile.
func (p *proc) reusable() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.signalled
}

// takeOwner returns and clears the owner: an activation ends once, whether
// by a Done or by the exit that may follow it.
func (p *proc) takeOwner() func(*proc, ending) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.owner
	p.owner, p.act = nil, nil
	return f
}

// abandon kills a process whose activation failed, without waiting for
// the reap: its reaper may have taken the owner already, and that owner
// waits for the spawn to finish (see spawn's handed).
func (p *proc) abandon() {
	p.p.Kill()
	if p.park.UnixConn != nil {
		p.park.Close()
	}
}

// Kill kills a parked process and returns once it was reaped: its memory
// is back and no zombie is left.
func (p *proc) Kill() {
	p.p.Kill()
	if p.park.UnixConn != nil {
		p.park.Close()
	}
	<-p.reaped
}

// memOf returns a process's proportional set size in bytes: shared pages
// (the program's text, shared by every entry of the pool) count in part.
func memOf(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("Pss:")); ok {
			f := bytes.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
