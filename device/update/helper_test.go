package update

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/vm/vmtest"
)

// lockedMounter records remounts from any goroutine and does nothing.
type lockedMounter struct {
	mu    sync.Mutex
	calls []string
	fail  error
}

func (m *lockedMounter) Mount(source, target, fstype string, flags uintptr, data string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ro := "rw"
	if flags&syscall.MS_RDONLY != 0 {
		ro = "ro"
	}
	m.calls = append(m.calls, "remount "+ro)
	return m.fail
}

func (m *lockedMounter) log() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.calls, ",")
}

// fakeSupervisor runs Do's functions at once, and each trial to its end
// without a service: the switch, then the keep, or with rollBack the
// revert, as nvinit's supervisor calls them.
type fakeSupervisor struct {
	mu       sync.Mutex
	rollBack bool
	trials   []string // the services Replace was asked for, with their Path
	onSwitch func()   // called just before each switch
}

func (s *fakeSupervisor) Do(f func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	return nil
}

func (s *fakeSupervisor) Replace(name string, deadline time.Duration, ops TrialOps) TrialResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trials = append(s.trials, name+" "+ops.Path)
	if s.onSwitch != nil {
		s.onSwitch()
	}
	if err := ops.Switch(); err != nil {
		return TrialResult{Err: err}
	}
	if s.rollBack {
		if err := ops.Revert(); err != nil {
			return TrialResult{Err: err}
		}
		return TrialResult{Result: contract.DeployRolledBack, Reason: "the fake said so"}
	}
	if err := ops.Keep(); err != nil {
		return TrialResult{Err: err}
	}
	return TrialResult{Result: contract.DeployKept, Ready: time.Millisecond, Downtime: 2 * time.Millisecond}
}

// probeProgram is a static Go program (off2f's test probe), built once.
func probeProgram(t *testing.T) []byte {
	t.Helper()
	return vmtest.StaticBytes(t, "../../off2f/testdata/progs/probe")
}

// served serves r in-process and checks that the answer has code and
// says want.
func served(t *testing.T, u *Server, name string, r *http.Request, code int, want string) {
	t.Helper()
	w := httptest.NewRecorder()
	u.ServeHTTP(w, r)
	if w.Code != code || !strings.Contains(w.Body.String(), want) {
		t.Errorf("%s: %d %q, want %d with %q", name, w.Code, w.Body.String(), code, want)
	}
}

// waitUnlocked waits until the endpoint's lock is free again, as a cut
// upload must leave it.
func waitUnlocked(t *testing.T, u *Server) {
	t.Helper()
	for i := 0; !u.mu.TryLock(); i++ {
		if i == 1000 {
			t.Fatal("the cut upload never gave the lock back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	u.mu.Unlock()
}

// waitStaged waits until an upload's staged part appears at path.
func waitStaged(t *testing.T, path string) {
	t.Helper()
	for i := 0; ; i++ {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if i == 1000 {
			t.Fatalf("the upload never started staging %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
