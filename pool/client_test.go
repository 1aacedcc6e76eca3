package pool

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestSpawnFindsEnvSocket: pool.Spawn dials $NVBOOT_POOLD_SOCKET and asks
// for the program with the argv and env given, the caller's working
// directory and three descriptors (nil ones /dev/null); the process's end
// is the Exited poold sends. A fake poold answers.
func TestSpawnFindsEnvSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv(EnvSocket, sock)
	asked := make(chan *Msg, 1)
	served := make(chan error, 1)
	go func() {
		served <- func() error {
			uc, err := ln.AcceptUnix()
			if err != nil {
				return err
			}
			c := Conn{uc}
			defer c.Close()
			m, files, err := c.Recv()
			closeAll(files)
			if err != nil {
				return err
			}
			m.NFiles = len(files)
			asked <- m
			if err := c.Send(&Msg{Type: TypeStarted, Pid: 7}, nil); err != nil {
				return err
			}
			return c.Send(&Msg{Type: TypeExited, Status: 5 << 8}, nil)
		}()
	}()

	p, err := Spawn(context.Background(), "hello", []string{"hello", "-v"}, []string{"A=1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(); err != nil || p.Pid != 7 || st.ExitCode() != 5 {
		t.Errorf("pid %d, %v %v; want pid 7, exit 5 from poold's Exited", p.Pid, st, err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	m := <-asked
	if m.Type != TypeSpawn || m.Name != "hello" || !slices.Equal(m.Argv, []string{"hello", "-v"}) ||
		!slices.Equal(m.Env, []string{"A=1"}) || m.Dir != wd || m.NFiles != 3 {
		t.Errorf("poold was asked %+v; want a spawn of hello with the argv, env, %s and 3 files", m, wd)
	}
}

// TestClientEndPipeStaleExited: on a kept connection, a spawn whose end
// came by the end pipe may still be followed by poold's Exited for it (its
// process died between its report and its Done); the next spawn's answer
// comes after that Exited, and the client must take the answer, not the
// stale Exited. A fake poold plays the two spawns.
func TestClientEndPipeStaleExited(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() { served <- fakePoold(ln) }()

	c := &Client{Socket: sock, KeepConns: true}
	defer c.Close()
	p1, err := c.Spawn(context.Background(), "x", Attr{Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p1.Wait()
	if err != nil || p1.Pid != 100 || !st.Success() || st.Usage.MinorFaults != 42 {
		t.Fatalf("spawn 1: pid %d, %v %+v %v; want pid 100, success by the end record", p1.Pid, st, st, err)
	}
	if err := p1.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("signal after Wait: %v", err)
	}
	p2, err := c.Spawn(context.Background(), "x", Attr{Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if p2.Pid != 200 {
		t.Fatalf("spawn 2 got pid %d, want 200 (the stale Exited taken for its answer?)", p2.Pid)
	}
	if st, err := p2.Wait(); err != nil || st.ExitCode() != 3 {
		t.Fatalf("spawn 2: %v %v, want exit 3 from poold's Exited", st, err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// fakePoold serves one connection: spawn 1 is reported by the end pipe and
// then by a (stale) Exited; spawn 2's end pipe closes unwritten and its
// Exited says exit 3.
func fakePoold(ln *net.UnixListener) error {
	uc, err := ln.AcceptUnix()
	if err != nil {
		return err
	}
	c := Conn{uc}
	defer c.Close()
	for i, pid := range []int64{100, 200} {
		m, files, err := c.Recv()
		if err != nil {
			return err
		}
		if m.Type != TypeSpawn || m.Flags&(FlagEndPipe|FlagKeepConn) != FlagEndPipe|FlagKeepConn || len(files) != 4 {
			closeAll(files)
			return errors.New("spawn without a kept connection and an end pipe")
		}
		if err := c.Send(&Msg{Type: TypeStarted, Pid: pid}, nil); err != nil {
			return err
		}
		end := files[3]
		if i == 0 {
			rec := EncodeEndRecord(0, Usage{MinorFaults: 42})
			end.Write(rec[:])
		}
		closeAll(files)
		status := int64(syscall.SIGKILL) // stale: what the reap said after the record
		if i == 1 {
			status = 3 << 8
		}
		if err := c.Send(&Msg{Type: TypeExited, Status: status}, nil); err != nil {
			return err
		}
	}
	return nil
}
