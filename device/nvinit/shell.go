package nvinit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/internal/cli"
)

// shellEnv is the console shell's environment: the userland's commands
// after /sbin, where nvinit's own (poweroff, reboot, start) are, and
// before /bin, the services.
var shellEnv = []string{"PATH=/sbin:" + contract.UserlandDir + ":/bin", "HOME=/", "TERM=vt100"}

// shell runs a shell on the console (nvinit's standard input, output and
// error) in an image with a userland: the console is then the shell's, and
// nvinit takes its commands from CommandFIFO instead.
type shell struct {
	Path    string
	Console *console
	Reaper  *reaper
	// Files are the shell's fds 0, 1, 2; nil: nvinit's own.
	Files []uintptr
	// Until, when set, holds the first start until it is closed (the
	// services are ready) or Wait has passed (one never is): the shell's
	// start took 2-4 ms from the service's on the device clock
	// (BENCHMARKS.md, "Userland"), and the console is for people.
	Until <-chan struct{}
	Wait  time.Duration
}

// shellWait is the longest the console shell waits for the services to be
// ready before it starts anyway.
const shellWait = 2 * time.Second

// Run starts the shell, restarts it after each exit (after nextBackoff's
// delay, reset by a run of 10 s: someone typing exit gets a new prompt at
// once, a shell that cannot start does not spin) and, when ctx ends, kills
// its session and waits for it, so that nothing maps the text store while
// it is unmounted.
func (sh *shell) Run(ctx context.Context) {
	if sh.Until != nil {
		select {
		case <-sh.Until:
		case <-time.After(sh.Wait):
		case <-ctx.Done():
			return
		}
	}
	var delay time.Duration
	for {
		start := time.Now()
		pid, exited, err := sh.start()
		if err != nil {
			sh.Console.Logf("shell %s: %v", sh.Path, err)
		} else {
			select {
			case ws := <-exited:
				sh.Console.Logf("shell %s exited (%s)", sh.Path, exitText(ws))
			case <-ctx.Done():
				// Setsid made the shell a group leader: its children go too.
				syscall.Kill(-pid, syscall.SIGKILL)
				<-exited
				return
			}
		}
		if time.Since(start) > 10*time.Second {
			delay = 0
		}
		delay = nextBackoff(delay)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
	}
}

// start forks the shell in a session of its own with the console as its
// controlling terminal, so that Ctrl-C on the console interrupts what the
// shell runs. A console that cannot be a controlling terminal (TIOCSCTTY
// refused) still gets the shell, without that.
func (sh *shell) start() (int, <-chan syscall.WaitStatus, error) {
	files := sh.Files
	if files == nil {
		files = []uintptr{0, 1, 2}
	}
	exited := make(chan syscall.WaitStatus, 1)
	done := func(ws syscall.WaitStatus) { exited <- ws }
	attr := &syscall.ProcAttr{Dir: "/", Env: shellEnv, Files: files,
		Sys: &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}}
	fork := func() (int, error) { return syscall.ForkExec(sh.Path, []string{sh.Path}, attr) }
	pid, err := sh.Reaper.Start(fork, done)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTTY) {
		attr.Sys.Setctty = false
		pid, err = sh.Reaper.Start(fork, done)
	}
	return pid, exited, err
}

// exitText says how a process ended: "status N" or "signal S".
func exitText(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return fmt.Sprintf("status %d", ws.ExitStatus())
}

// openCommands makes the FIFO nvinit's console commands come through in an
// image with a shell, and opens it for reading. It is opened read-write,
// so that it has a writer for as long as nvinit runs: a read then waits
// for the next command instead of seeing the end of the file after each.
func openCommands(path string) (*os.File, error) {
	if err := syscall.Mkfifo(path, 0o600); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("command fifo %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("command fifo: %w", err)
	}
	return f, nil
}

// Command is nvinit run by one of the names of contract.InitCommands (a link
// in /sbin, in an image with a shell): it hands the command to PID 1
// through the FIFO at fifo, as if typed on a console nvinit read.
func Command(c *cli.Context, name, fifo string) error {
	line := name
	switch name {
	case "start":
		if len(c.Args) != 1 || strings.HasPrefix(c.Args[0], "-") {
			return cli.Usagef("usage: start NAME (a service of /etc/nvboot/config.json)")
		}
		line += " " + c.Args[0]
	default:
		if !slices.Contains(contract.InitCommands, name) {
			return fmt.Errorf("%q is not one of nvinit's commands (%s)", name, strings.Join(contract.InitCommands, ", "))
		}
		if len(c.Args) != 0 {
			return cli.Usagef("usage: %s (no arguments: nvinit stops the services, unmounts and then does it)", name)
		}
	}
	// Non-blocking: with no reader (nvinit not PID 1 of this image, or
	// not reading) the open fails with ENXIO instead of hanging.
	f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("%s: nvinit does not take commands here (%s): %w", name, fifo, err)
	}
	defer f.Close()
	if _, err := io.WriteString(f, line+"\n"); err != nil {
		return fmt.Errorf("%s: writing to %s: %w", name, fifo, err)
	}
	return nil
}
