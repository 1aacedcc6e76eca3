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

// DefaultSocket is where poold listens.
const DefaultSocket = "/run/poold.sock"

// EnvSocket overrides DefaultSocket for clients.
const EnvSocket = "NVBOOT_POOLD_SOCKET"

// Client talks to one poold.
type Client struct {
	// Socket is poold's socket; empty: $NVBOOT_POOLD_SOCKET, else DefaultSocket.
	Socket string
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
func (c *Client) Spawn(ctx context.Context, name string, a Attr) (*Process, error) {
	dir := a.Dir
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("spawning %s: %w", name, err)
		}
	}
	files, closeNull, err := withDevNull(a.Files)
	if err != nil {
		return nil, fmt.Errorf("spawning %s: %w", name, err)
	}
	defer closeNull()
	conn, err := c.Dial(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	m := &Msg{Type: TypeSpawn, Name: name, Argv: a.Argv, Env: a.Env, Dir: dir}
	if err := conn.Send(m, files); err != nil {
		conn.Close()
		return nil, fmt.Errorf("spawning %s: %w", name, err)
	}
	r, rfiles, err := conn.Recv()
	closeAll(rfiles)
	if err == nil && r.Type == TypeError {
		err = errors.New(r.Name)
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
	return &Process{Pid: int(r.Pid), Hit: r.Flags&FlagHit != 0, conn: conn}, nil
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

	conn  Conn
	once  sync.Once
	state *State
	err   error
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
		defer p.conn.Close()
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
	})
	return p.state, p.err
}

// Signal asks poold to send sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.conn.Send(&Msg{Type: TypeSignal, Signal: int64(sig)}, nil); err != nil {
		return fmt.Errorf("signalling pid %d: %w", p.Pid, err)
	}
	return nil
}

// Kill sends SIGKILL.
func (p *Process) Kill() error { return p.Signal(syscall.SIGKILL) }

// Release closes the connection without waiting; poold still reaps the
// process.
func (p *Process) Release() error { return p.conn.Close() }

// Stats asks poold for its statistics, decoded into v (see poold's Stats).
func (c *Client) Stats(ctx context.Context, v any) error {
	r, err := c.call(ctx, TypeStats)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		return fmt.Errorf("poold stats: %w", err)
	}
	return nil
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
