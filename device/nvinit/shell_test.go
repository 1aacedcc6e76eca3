package nvinit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvboot/nvboot/internal/cli"
)

// TestShellRestartsAndStops: the console shell is restarted after it exits
// (someone typed exit), runs with the userland's PATH, and when the machine
// shuts down it is killed with what it started and waited for. Its fds
// are a pipe, which cannot be a controlling terminal: it runs without one.
func TestShellRestartsAndStops(t *testing.T) {
	dir := t.TempDir()
	sh := filepath.Join(dir, "sh")
	// First run: print PATH and exit; later runs: block, as a shell
	// waiting for input does.
	script := "#!/bin/sh\necho \"run $PATH\"\nif [ -e " + dir + "/ran ]; then exec sleep 60; fi\ntouch " + dir + "/ran\nexit 3\n"
	if err := os.WriteFile(sh, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var log bytes.Buffer
	con := &console{W: &log} // read under con.mu
	rp := &reaper{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go rp.Run(ctx)
	shctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		(&shell{Path: sh, Console: con, Reaper: rp, Files: []uintptr{0, w.Fd(), w.Fd()}}).Run(shctx)
		close(done)
	}()
	lines := bufio.NewScanner(r)
	for i := 0; i < 2; i++ {
		if !lines.Scan() {
			t.Fatalf("run %d: no output", i+1)
		}
		if want := "run " + shellEnv[0][len("PATH="):]; lines.Text() != want {
			t.Errorf("run %d printed %q, want %q", i+1, lines.Text(), want)
		}
	}
	stop()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	w.Close()
	if lines.Scan() {
		t.Errorf("more output after the stop: %q", lines.Text())
	}
	con.mu.Lock()
	logged := log.String()
	con.mu.Unlock()
	if !strings.Contains(logged, "exited (status 3)") {
		t.Errorf("console log %q: want the first run's exit status", logged)
	}
}

// TestCommandThroughFIFO: poweroff, reboot and start NAME, run as nvinit's
// links, reach PID 1's command reader as typed console lines would.
func TestCommandThroughFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "nvinit.cmd")
	f, err := openCommands(fifo)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sigs := make(chan os.Signal, 2)
	starts := make(chan string, 1)
	go consoleCommandsStart(f, sigs, starts, func(string, ...any) {})
	c := &cli.Context{Stdout: os.Stdout, Stderr: os.Stderr}
	c.Args = []string{"breakglass"}
	if err := Command(c, "start", fifo); err != nil {
		t.Fatal(err)
	}
	if got := <-starts; got != "breakglass" {
		t.Errorf("start: %q", got)
	}
	c.Args = nil
	if err := Command(c, "reboot", fifo); err != nil {
		t.Fatal(err)
	}
	if got := <-sigs; got != syscall.SIGINT {
		t.Errorf("reboot: %v", got)
	}
	if err := Command(c, "poweroff", fifo); err != nil {
		t.Fatal(err)
	}
	if got := <-sigs; got != syscall.SIGTERM {
		t.Errorf("poweroff: %v", got)
	}
}

func TestCommandRejects(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "nvinit.cmd")
	c := &cli.Context{}
	if err := Command(c, "poweroff", fifo); err == nil || !strings.Contains(err.Error(), fifo) {
		t.Errorf("no FIFO: %v, want an error naming it", err)
	}
	f, err := openCommands(fifo)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Made but nobody reading: an error, not a hang.
	if err := Command(c, "poweroff", fifo); !errors.Is(err, syscall.ENXIO) {
		t.Errorf("no reader: %v, want ENXIO", err)
	}
	if err := Command(c, "start", fifo); !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "start NAME") {
		t.Errorf("start without a name: %v", err)
	}
	c.Args = []string{"now"}
	if err := Command(c, "reboot", fifo); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("reboot now: %v", err)
	}
}

// TestShellWaitsForServices: the console shell starts once the services
// are ready (Until closed) or Wait has passed, whichever comes first, and
// not at all if the machine stops before either.
func TestShellWaitsForServices(t *testing.T) {
	dir := t.TempDir()
	sh := filepath.Join(dir, "sh")
	if err := os.WriteFile(sh, []byte("#!/bin/sh\necho started\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rp := &reaper{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go rp.Run(ctx)
	run := func(until chan struct{}, wait time.Duration, stopFirst bool) string {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		shctx, stop := context.WithCancel(ctx)
		defer stop()
		if stopFirst {
			stop()
		}
		done := make(chan struct{})
		go func() {
			(&shell{Path: sh, Console: &console{W: io.Discard}, Reaper: rp, Files: []uintptr{0, w.Fd(), w.Fd()},
				Until: until, Wait: wait}).Run(shctx)
			w.Close()
			close(done)
		}()
		if !stopFirst {
			line, _ := bufio.NewReader(r).ReadString('\n')
			stop()
			<-done
			return line
		}
		<-done
		out, _ := io.ReadAll(r)
		return string(out)
	}
	ready := make(chan struct{})
	close(ready)
	if got := run(ready, time.Hour, false); got != "started\n" {
		t.Errorf("services ready: %q", got)
	}
	if got := run(make(chan struct{}), time.Millisecond, false); got != "started\n" {
		t.Errorf("services never ready, after Wait: %q", got)
	}
	if got := run(make(chan struct{}), time.Hour, true); got != "" {
		t.Errorf("stopped before the services were ready: the shell printed %q", got)
	}
}
