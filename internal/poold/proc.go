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

	"github.com/nvboot/nvboot/pool"
)

// startTimeout bounds how long a new process may take to park.
const startTimeout = 30 * time.Second

// procStarter starts parked processes of one program.
type procStarter struct {
	prog     Program
	self     string // the binary that parks for Exec programs
	cgroupFD int    // -1: none
	cred     *syscall.Credential
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
	// reuse: the process was offered reuse, so its pool socket stays open
	// through an activation and may bring a Done. uses counts the
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
	if s.prog.Prefault {
		env = append(env, pool.EnvPrefault+"=1")
	}
	if s.prog.Reuses() {
		env = append(env, pool.EnvReuse+"=1")
	}
	sys := &syscall.SysProcAttr{Credential: s.cred, Setsid: true}
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
	if err := startIdle(fork); err != nil {
		conn.Close()
		return nil, fmt.Errorf("starting %s: %w", s.prog.Name, err)
	}
	pr := &proc{pid: p.Pid, p: p, park: conn, reaped: make(chan struct{}), reuse: s.prog.Reuses()}
	go func() {
		st, _ := p.Wait()
		s.exited(pr, st)
		close(pr.reaped)
	}()
	if err := s.awaitReady(pr); err != nil {
		pr.Kill()
		return nil, fmt.Errorf("starting %s: %w", s.prog.Name, err)
	}
	return pr, nil
}

// direct starts the program straight with a request, as os/exec would,
// for a spawn that found no parked process: waiting for a new process to
// park and then activating it would cost more than this.
func (s *procStarter) direct(m *pool.Msg, files []*os.File, owner func(*proc, ending), act chan struct{}) (*proc, error) {
	sys := &syscall.SysProcAttr{Credential: s.cred, Setsid: true}
	if s.cgroupFD >= 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, s.cgroupFD
	}
	p, err := os.StartProcess(s.prog.Path, m.Argv, &os.ProcAttr{Dir: m.Dir, Env: m.Env, Files: files, Sys: sys})
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", s.prog.Name, err)
	}
	pr := &proc{pid: p.Pid, p: p, reaped: make(chan struct{}), owner: owner, act: act}
	setRlimits(p.Pid, s.prog.Rlimits) // best effort: the program already runs
	go func() {
		st, _ := p.Wait()
		s.exited(pr, st)
		close(pr.reaped)
	}()
	return pr, nil
}

func (s *procStarter) awaitReady(pr *proc) error {
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
	unidle(pr.pid)
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
	}
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
	p.owner, p.act = f, act
	p.mu.Unlock()
}

// signal sends sig if activation act still owns the process, and reports
// whether it did. A reused process serves one activation after another:
// checking that act ended and then signalling (as before) let a signal
// sent just as act ended reach the process's next activation, another
// client's request. Under mu, the end cannot be taken (takeOwner) between
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
	return true
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
