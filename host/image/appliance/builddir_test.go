package appliance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// deadPID is above PID_MAX_LIMIT: no process ever has it.
const deadPID = 1<<22 + 1

// What a killed build left is removed by the next build of the same name;
// what a running build uses, what cannot be judged and what is not a build
// directory of that name are kept.
func TestRemoveStale(t *testing.T) {
	parent := t.TempDir()
	me := os.Getpid()
	dirs := map[string]bool{ // name: removed
		fmt.Sprintf(".out.build-%d-123", deadPID):     true,
		fmt.Sprintf(".out.build-%d-124.old", deadPID): true,
		fmt.Sprintf(".out.build-%d-125", me):          false, // its process runs
		fmt.Sprintf(".out.build-%d-126", deadPID):     false, // locked (a builder in another pid namespace)
		".out.build-4242":                             false, // no process id: not a build directory
		fmt.Sprintf(".other.build-%d-1", deadPID):     false, // another output
		fmt.Sprintf(".out.build-%d-x", deadPID):       false,
		fmt.Sprintf("out.build-%d-1", deadPID):        false,
		"out":                                         false,
	}
	for d := range dirs {
		if err := os.MkdirAll(filepath.Join(parent, d, ".work", "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := fmt.Sprintf(".out.build-%d-127", deadPID) // not a directory
	os.WriteFile(filepath.Join(parent, file), nil, 0o644)
	dirs[file] = false
	lock, err := lockDir(filepath.Join(parent, fmt.Sprintf(".out.build-%d-126", deadPID)), true)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	var logged []string
	removeStale(parent, "out", func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) })
	for d, removed := range dirs {
		_, err := os.Lstat(filepath.Join(parent, d))
		if gone := errors.Is(err, os.ErrNotExist); gone != removed {
			t.Errorf("%s: removed %v, want %v", d, gone, removed)
		}
	}
	log := strings.Join(logged, "\n")
	if !strings.Contains(log, "removed "+filepath.Join(parent, fmt.Sprintf(".out.build-%d-123", deadPID))) {
		t.Errorf("log:\n%s", log)
	}
}

// While a build runs, its directory beside the output is named with its
// process id and locked, so another build's cleanup keeps it; a cancelled
// build (Ctrl-C, SIGTERM) says it was interrupted, not what the
// cancellation killed, and leaves nothing.
func TestBuildInterrupted(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	names := func() []string {
		var n []string
		ents, _ := os.ReadDir(parent)
		for _, e := range ents {
			n = append(n, e.Name())
		}
		return n
	}
	checked := false
	logf := func(string, ...any) {
		if checked {
			return
		}
		checked = true
		seen := names()
		if len(seen) != 1 || !buildDirPattern("out").MatchString(seen[0]) || !strings.Contains(seen[0], fmt.Sprint(os.Getpid())) {
			t.Errorf("beside the output during the build: %v", seen)
		} else {
			if f, err := lockDir(filepath.Join(parent, seen[0]), true); !errors.Is(err, syscall.EWOULDBLOCK) {
				t.Errorf("the build directory is not locked: %v", err)
				f.Close()
			}
			removeStale(parent, "out", t.Logf)
			if _, err := os.Stat(filepath.Join(parent, seen[0])); err != nil {
				t.Errorf("a running build's directory was removed: %v", err)
			}
		}
		cancel()
	}
	_, err := Build(ctx, Options{Config: config.Demo(), Layout: OFF2F, Out: out, Kernel: buildtest.FakeKernel(t), ModuleRoot: moduleRoot(t), Logf: logf})
	if !checked {
		t.Fatalf("the build logged nothing: %v", err)
	}
	if err == nil || !strings.Contains(err.Error(), "interrupted") || !strings.Contains(err.Error(), out) {
		t.Fatalf("err = %v, want interrupted", err)
	}
	if left := names(); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}
