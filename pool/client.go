package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// DefaultSocket is where poold listens on an nvboot appliance
// (device/contract's PooldSocket).
const DefaultSocket = "/run/poold.sock"

// EnvSocket overrides DefaultSocket for clients.
const EnvSocket = "NVBOOT_POOLD_SOCKET"

// Client talks to one poold. Use it by pointer; it may be used by many
// goroutines at once.
type Client struct {
	// Socket is poold's socket; empty: $NVBOOT_POOLD_SOCKET, else DefaultSocket.
	Socket string
	// KeepConns keeps connections to poold open once a spawn's process
	// ended (its Wait returned), up to MaxIdleConns, and uses them for
	// later spawns, which then cost no connect, accept and credential
	// check; and a process that reports its main's return (MaxUses ≥ 1)
	// tells the end straight to Wait, by an end pipe (FlagEndPipe), not
	// through poold. Close lets the connections go.
	KeepConns bool

	mu   sync.Mutex
	idle []keptConn
}

// keptConn is a connection kept for the next request. stale: the last
// spawn's end came by its end pipe, and poold may still send an Exited for
// it (only if the process died between its report and its Done), which
// the next spawn's answer then follows.
type keptConn struct {
	Conn
	stale bool
}

// MaxIdleConns bounds the connections a KeepConns client keeps.
const MaxIdleConns = 16

// Close closes the connections the client keeps; it may be used again
// afterwards.
func (c *Client) Close() error {
	c.mu.Lock()
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	for _, k := range idle {
		k.Close()
	}
	return nil
}

// take returns a kept connection, or a new one.
func (c *Client) take(ctx context.Context) (k keptConn, kept bool, err error) {
	c.mu.Lock()
	if n := len(c.idle); n > 0 {
		k = c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return k, true, nil
	}
	c.mu.Unlock()
	k.Conn, err = c.Dial(ctx)
	return k, false, err
}

// keep puts a connection whose spawn ended back, or closes it.
func (c *Client) keep(k keptConn) {
	c.mu.Lock()
	if len(c.idle) < MaxIdleConns {
		c.idle = append(c.idle, k)
		k.Conn = Conn{}
	}
	c.mu.Unlock()
	if k.UnixConn != nil {
		k.Close()
	}
}

// Attr is what an activated process gets.
type Attr struct {
	Argv []string // os.Args of the process; empty: the program name
	Env  []string // its whole environment
	Dir  string   // working directory; empty: the caller's
	// Files become descriptors 0, 1, 2, ... in the process. A nil entry
	// among the first three is /dev/null, as with os/exec.
	Files []*os.File
}

// Spawn starts the pool program name with argv, env and files through the
// poold at DefaultSocket (or $NVBOOT_POOLD_SOCKET), in the caller's working
// directory.
func Spawn(ctx context.Context, name string, argv, env []string, files []*os.File) (*Process, error) {
	return (&Client{}).Spawn(ctx, name, Attr{Argv: argv, Env: env, Files: files})
}

func (c *Client) socket() string {
	if c.Socket != "" {
		return c.Socket
	}
	if s := os.Getenv(EnvSocket); s != "" {
		return s
	}
	return DefaultSocket
}

// Dial connects to poold; most callers want Spawn, Stats or Reduce.
func (c *Client) Dial(ctx context.Context) (Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unixpacket", c.socket())
	if err != nil {
		return Conn{}, fmt.Errorf("connecting to poold at %s (is poold running?): %w", c.socket(), err)
	}
	return Conn{nc.(*net.UnixConn)}, nil
}

// Spawn asks poold to start the program name with a.
func (c *Client) Spawn(ctx context.Context, name string, a Attr) (_ *Process, err error) {
	dir := a.Dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("spawning %s: %w", name, err)
		}
	}
	files, closeNull, err := withDevNull(a.Files)
	if err != nil {
		return nil, fmt.Errorf("spawning %s: %w", name, err)
	}
	defer closeNull()
	m := &Msg{Type: TypeSpawn, Name: name, Argv: a.Argv, Env: a.Env, Dir: dir}
	if c.KeepConns {
		m.Flags = FlagKeepConn
	}
	var end *os.File
	if c.KeepConns && len(files) < MaxFiles {
		// The end pipe: a process that reports its main's return tells
		// us here, one hop instead of two through poold. Only on a kept
		// connection: poold serves its next spawn once this one's end
		// was handled (the process is parked again); a new connection's
		// spawn could come first and miss it.
		r, w, perr := blockingPipe()
		if perr != nil {
			return nil, fmt.Errorf("spawning %s: %w", name, perr)
		}
		defer w.Close()
		defer func() {
			if err != nil { // the read end is the Process's once it exists
				r.Close()
			}
		}()
		end = r
		files = append(files, w)
		m.Flags |= FlagEndPipe
	}
	k, kept, err := c.take(ctx)
	if err != nil {
		return nil, err
	}
	conn := k.Conn
	err = conn.Send(m, files)
	if err != nil && kept {
		// poold closed a kept connection (it restarted): it never saw
		// the request, so a new connection may carry it.
		conn.Close()
		k = keptConn{}
		if conn, err = c.Dial(ctx); err != nil {
			return nil, err
		}
		err = conn.Send(m, files)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("spawning %s: %w", name, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	r, rfiles, err := conn.Recv()
	closeAll(rfiles)
	if err == nil && k.stale && r.Type == TypeExited {
		// The last spawn's, which had its end by the end pipe.
		r, rfiles, err = conn.Recv()
		closeAll(rfiles)
	}
	if err == nil && r.Type == TypeError {
		// A refusal: the connection is fine for the next request.
		if stop() && c.KeepConns {
			c.keep(keptConn{Conn: conn})
		} else {
			conn.Close()
		}
		return nil, fmt.Errorf("spawning %s: %s", name, r.Name)
	} else if err == nil && r.Type != TypeStarted {
		err = fmt.Errorf("%w: poold answered spawn with %v", ErrBadMessage, r.Type)
	}
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("spawning %s: %w", name, err)
	}
	p := &Process{Pid: int(r.Pid), Hit: r.Flags&FlagHit != 0, conn: conn, end: end}
	if c.KeepConns && stop() {
		// Kept afterwards only if ctx did not close it meanwhile.
		p.client = c
	}
	return p, nil
}

// withDevNull fills nil slots among the first three files with /dev/null.
func withDevNull(files []*os.File) ([]*os.File, func(), error) {
	out := append([]*os.File(nil), files...)
	for len(out) < 3 {
		out = append(out, nil)
	}
	var null *os.File
	for i, f := range out {
		if f != nil {
			continue
		}
		if i >= 3 {
			return nil, nil, fmt.Errorf("file %d is nil (only 0, 1, 2 may be, for /dev/null)", i)
		}
		if null == nil {
			var err error
			if null, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
				return nil, nil, err
			}
		}
		out[i] = null
	}
	return out, func() {
		if null != nil {
			null.Close()
		}
	}, nil
}

// Process is a process poold activated for this client.
type Process struct {
	Pid int
	// Hit says a parked process served the spawn; false: poold had none
	// idle and started one on the request path.
	Hit bool

	conn   Conn
	end    *os.File // read end of the end pipe; nil: none
	client *Client  // keeps conn once the process ended; nil: closed then
	once   sync.Once
	mu     sync.Mutex // orders Signal and Release against the end of Wait
	ended  bool       // Wait returned, or Release: conn is no longer ours
	state  *State
	err    error
}

// State is how an activated process ended.
type State struct {
	Status syscall.WaitStatus
	Usage  Usage
}

// ExitCode is the exit status, or -1 when a signal ended the process (as
// os.ProcessState.ExitCode).
func (s *State) ExitCode() int {
	if !s.Status.Exited() {
		return -1
	}
	return s.Status.ExitStatus()
}

// Success reports exit status 0.
func (s *State) Success() bool { return s.ExitCode() == 0 }

func (s *State) String() string {
	if s.Status.Signaled() {
		return "signal: " + s.Status.Signal().String()
	}
	return fmt.Sprintf("exit status %d", s.Status.ExitStatus())
}

// Wait waits for the process to exit and returns how it ended, as poold saw
// it (poold is its parent).
func (p *Process) Wait() (*State, error) {
	p.once.Do(func() {
		if p.endRecord() {
			p.finish(true)
			return
		}
		m, files, err := p.conn.Recv()
		closeAll(files)
		switch {
		case errors.Is(err, io.EOF):
			p.err = fmt.Errorf("waiting for pid %d: poold closed the connection", p.Pid)
		case err != nil:
			p.err = fmt.Errorf("waiting for pid %d: %w", p.Pid, err)
		case m.Type == TypeError:
			p.err = fmt.Errorf("waiting for pid %d: %s", p.Pid, m.Name)
		case m.Type != TypeExited:
			p.err = fmt.Errorf("waiting for pid %d: %w: got %v", p.Pid, ErrBadMessage, m.Type)
		default:
			p.state = &State{Status: syscall.WaitStatus(m.Status), Usage: m.Usage}
		}
		p.finish(false)
	})
	return p.state, p.err
}

// endRecord reads the end pipe: true with p.state set when the process
// reported its end there; false when it closed unwritten (the end comes
// from poold) or there is none.
func (p *Process) endRecord() bool {
	if p.end == nil {
		return false
	}
	var b [EndRecordSize]byte
	_, err := io.ReadFull(p.end, b[:]) // one write of the whole record, or none
	p.end.Close()
	if err != nil {
		return false
	}
	st, u := DecodeEndRecord(b)
	p.state = &State{Status: syscall.WaitStatus(st), Usage: u}
	return true
}

// finish lets the connection go once the process ended: kept for the next
// spawn (stale: the end came by the end pipe), else closed.
func (p *Process) finish(stale bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended { // Released meanwhile: conn is closed
		return
	}
	p.ended = true
	if p.err == nil && p.client != nil {
		p.client.keep(keptConn{Conn: p.conn, stale: stale})
	} else {
		p.conn.Close()
	}
}

// Signal asks poold to send sig to the process; after Wait returned (or
// Release) it returns an error wrapping os.ErrProcessDone.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return fmt.Errorf("signalling pid %d: %w", p.Pid, os.ErrProcessDone)
	}
	if err := p.conn.Send(&Msg{Type: TypeSignal, Signal: int64(sig)}, nil); err != nil {
		return fmt.Errorf("signalling pid %d: %w", p.Pid, err)
	}
	return nil
}

// Kill sends SIGKILL.
func (p *Process) Kill() error { return p.Signal(syscall.SIGKILL) }

// Release closes the connection without waiting; poold still reaps the
// process. A Wait already blocked on the end pipe returns when the process
// ends (the pipe is blocking: closing it does not interrupt the read).
func (p *Process) Release() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return nil
	}
	p.ended = true
	if p.end != nil {
		p.end.Close()
	}
	return p.conn.Close()
}

// Stats asks poold for its statistics.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	r, err := c.call(ctx, TypeStats)
	if err != nil {
		return nil, err
	}
	var st Stats
	if err := json.Unmarshal(r.Data, &st); err != nil {
		return nil, fmt.Errorf("poold stats: %w", err)
	}
	return &st, nil
}

// Reduce asks poold to trim now what stayed idle past its timeout.
func (c *Client) Reduce(ctx context.Context) error {
	_, err := c.call(ctx, TypeReduce)
	return err
}

func (c *Client) call(ctx context.Context, t Type) (*Msg, error) {
	conn, err := c.Dial(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := conn.Send(&Msg{Type: t}, nil); err != nil {
		return nil, fmt.Errorf("poold %v: %w", t, err)
	}
	r, files, err := conn.Recv()
	closeAll(files)
	if err != nil {
		return nil, fmt.Errorf("poold %v: %w", t, err)
	}
	if r.Type == TypeError {
		return nil, fmt.Errorf("poold %v: %s", t, r.Name)
	}
	return r, nil
}

// blockingPipe is os.Pipe without O_NONBLOCK: Wait's read of the end record
// blocks in the kernel, so the process's write wakes this thread directly,
// not the runtime's poller and then this goroutine (one wakeup, not two).
func blockingPipe() (r, w *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}
