package nvinit

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
)

// helperEnv names what the test binary does when a test starts it as a
// service: the listening services the shell cannot be.
const helperEnv = "NVINIT_TEST_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(helper(h, os.Getenv("ADDR"), os.Getenv("GATE")))
	}
	os.Exit(m.Run())
}

// helper is a service for the supervisor tests; it prints "up PID" once it
// listens on the unix socket addr, then:
//
//	exit-on-dial: exits 1 as soon as someone connects (with HELPER_LINGER
//	set, leaving a child that holds its output open a second longer);
//	exit-on-gate: exits 1 once the file gate exists (and removes it);
//	serve: runs until it is killed.
func helper(mode, addr, gate string) int {
	if mode == "serve" {
		// A stale socket of a run killed by SIGTERM (which skips the
		// deferred Close) would make the listen fail.
		os.Remove(addr)
	}
	l, err := net.Listen("unix", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	// Not l.Close: the next run listens on the same path.
	l.(*net.UnixListener).SetUnlinkOnClose(true)
	defer l.Close()
	fmt.Printf("up %d\n", os.Getpid())
	switch mode {
	case "exit-on-dial":
		if os.Getenv("HELPER_LINGER") != "" {
			// A child that keeps the output pipe open after we exit.
			os.StartProcess("/bin/sleep", []string{"sleep", "1"},
				&os.ProcAttr{Files: []*os.File{nil, os.Stdout, os.Stderr}})
		}
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		fmt.Fprintln(os.Stderr, "dialled; exiting")
	case "exit-on-gate":
		for {
			if os.Remove(gate) == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Fprintln(os.Stderr, "gate opened; exiting")
	case "serve":
		// Serves until a signal ends it (SIGTERM's default action).
		select {}
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 3
	}
	return 1
}

// helperService is a service running the test binary as helper mode.
func helperService(t *testing.T, name, mode, addr, gate string) contract.Service {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return contract.Service{Name: name, Path: exe, WaitFor: addr,
		Env: []string{helperEnv + "=" + mode, "ADDR=" + addr, "GATE=" + gate}}
}
