package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// SIGTERM, SIGHUP and SIGINT in the middle of a build (mke2fs running) stop
// it as Ctrl-C does: nvboot reports that it was interrupted, exits 1, and
// leaves no .out.build-* directory and no output behind. What a SIGKILLed
// build left, the next build removes.
func TestBuildSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds nvboot, nvinit and kv")
	}
	buildtest.NeedTools(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "nvboot")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	kernel := buildtest.FakeKernel(t)
	// build runs nvboot build into parent/out and sends sig once the line
	// containing at comes; it returns the exit code and stderr.
	build := func(t *testing.T, parent, at string, sig syscall.Signal) (int, string) {
		cmd := exec.Command(bin, "build", "-src", root, "-kernel", kernel, "-o", filepath.Join(parent, "out"))
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		var log strings.Builder
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !sent && strings.Contains(sc.Text(), at) {
				time.Sleep(20 * time.Millisecond)
				cmd.Process.Signal(sig)
				sent = true
			}
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		if !sent || !errors.As(err, &exit) {
			t.Fatalf("signal sent %v, exit %v\n%s", sent, err, log.String())
		}
		return exit.ExitCode(), log.String()
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			parent := t.TempDir()
			// The text store's mke2fs comes right after "text store:".
			code, log := build(t, parent, "text store:", sig)
			if code != 1 || !strings.Contains(log, "nvboot: interrupted (") || strings.Contains(log, "mke2fs") {
				t.Errorf("exit %d, want 1 and just 'interrupted':\n%s", code, log)
			}
			if ents, _ := os.ReadDir(parent); len(ents) != 0 {
				t.Errorf("left behind: %v", ents)
			}
		})
	}
	// SIGKILL leaves the build directory; the next build of out removes it.
	t.Run("killed", func(t *testing.T) {
		parent := t.TempDir()
		build(t, parent, "text store:", syscall.SIGKILL)
		left, _ := filepath.Glob(filepath.Join(parent, ".out.build-*"))
		if len(left) != 1 {
			t.Fatalf("after SIGKILL: %v", left)
		}
		_, log := build(t, parent, "building nvinit", syscall.SIGTERM)
		if !strings.Contains(log, "removed "+left[0]) {
			t.Errorf("the next build did not say it removed %s:\n%s", left[0], log)
		}
		if ents, _ := os.ReadDir(parent); len(ents) != 0 {
			t.Errorf("left behind: %v", ents)
		}
	})
}
