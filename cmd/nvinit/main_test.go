package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/format/bootmark"
)

// The test binary is nvinit when asked: the PID 1 test runs it that way.
func TestMain(m *testing.M) {
	if os.Getenv("NVINIT_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// Not PID 1, a stray argument is refused with exit status 2 at once, before
// any boot step (it used to boot on the host and wait to be killed).
func TestNotPID1StrayArgument(t *testing.T) {
	for _, args := range [][]string{{"-config", "/nonexistent", "bogusarg"}, {"-config", "/nonexistent"}} {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "NVINIT_TEST_MAIN=1")
		timer := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
		out, err := cmd.CombinedOutput()
		timer.Stop()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || strings.Contains(string(out), "NVBOOT-MARK") {
			t.Errorf("nvinit %q: %v, want exit status 2 and no boot\n%s", args, err, out)
		}
	}
}

// TestPID1 boots nvinit as PID 1 of a new PID and mount namespace (root
// only): kernel mounts, hostname, services, orphan reaping, and the
// power-off that ends the namespace.
func TestPID1(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (unshare)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare not installed")
	}
	// Not under /tmp: nvinit mounts a tmpfs there.
	dir, err := os.MkdirTemp("/var/tmp", "nvinit-test")
	if err != nil {
		t.Skip(err)
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(`{"Hostname":"nvtest","Poweroff":true,"Services":[
		{"Name":"hello","Path":"/bin/sh","Args":["-c","hostname; sleep 0.05 & exit 2"],"Restart":"never"}]}`), 0o644)
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount", "--uts", "--propagation", "private",
		os.Args[0], "-config", cfg, "splash") // a word the kernel passes on: ignored by PID 1
	cmd.Env = append(os.Environ(), "NVINIT_TEST_MAIN=1")
	out, _ := cmd.CombinedOutput() // init of a PID namespace ends by a signal
	var got []string
	for _, l := range strings.Split(string(out), "\n") {
		if m, ok := bootmark.Parse(l); ok {
			got = append(got, m.Key())
		}
	}
	if want := "init mounts store service-start:hello service-ready:hello shutdown"; strings.Join(got, " ") != want {
		t.Errorf("marks %q, want %q\n%s", got, want, out)
	}
	for _, want := range []string{`nvinit: ignoring the arguments ["splash"]: nvinit takes flags only`, "hello: nvtest\n", "nvinit: hello exited with status 2\n", "nvinit: power off\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// nvinit's start is on the boot's critical path, and every package it
// links runs its init there: none of nvboot's may do real work at init (a
// regexp compiled, a table parsed with fmt; three such regexps once cost
// the boot 1.7 ms at 1 GIPS). Allocations are the deterministic sign of
// it: GODEBUG=inittrace=1 counts each package's.
func TestInitIsCheap(t *testing.T) {
	const maxAllocs = 10
	cmd := exec.Command(os.Args[0], "-h")
	cmd.Env = append(os.Environ(), "NVINIT_TEST_MAIN=1", "GODEBUG=inittrace=1")
	out, _ := cmd.CombinedOutput() // -h exits non-zero
	seen := 0
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 11 || f[0] != "init" || !strings.HasPrefix(f[1], "github.com/nvboot/nvboot/") || f[10] != "allocs" {
			continue
		}
		seen++
		if n, err := strconv.Atoi(f[9]); err != nil || n > maxAllocs {
			t.Errorf("package %s allocates %s times at init (at most %d): make what it builds lazy (sync.OnceValue) or a constant\n%s", f[1], f[9], maxAllocs, l)
		}
	}
	if seen == 0 {
		t.Fatalf("no init lines of nvboot's packages in GODEBUG=inittrace=1's output:\n%s", out)
	}
}
