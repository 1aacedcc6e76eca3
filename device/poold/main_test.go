package poold

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/poold/childreport"
)

// The test binary is also the pooled program: it imports pool (through this
// package), so when poold starts it, it parks in pool's init; once activated,
// or when os/exec starts it with envChild set, it runs childMain instead of
// the tests.
const envChild = "POOLD_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(childMain(mode))
	}
	// Descriptors this test binary inherited (from whatever ran it) would
	// leak into os/exec children, not into poold's: keep them out of both.
	for fd := 3; fd < 256; fd++ {
		syscall.CloseOnExec(fd)
	}
	os.Exit(m.Run())
}

func childMain(mode string) int {
	switch mode {
	case "report":
		greet := flag.String("greet", "", "a flag")
		flag.Parse()
		r := childreport.Collect(*greet)
		if f := os.NewFile(3, "fd3"); f != nil {
			f.Write([]byte("fd3 here"))
		}
		json.NewEncoder(os.Stdout).Encode(r)
		return exitFromEnv()
	case "limits":
		// Its own RLIMIT_NOFILE, and what a child of its gets.
		var r syscall.Rlimit
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r)
		out, err := exec.Command("/bin/sh", "-c", "echo $(ulimit -Sn) $(ulimit -Hn)").Output()
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Printf("self %d %d child %s", r.Cur, r.Max, out)
		return 0
	case "block":
		os.Stdout.Write([]byte("ready\n"))
		var b [1]byte
		os.Stdin.Read(b[:])
		return 0
	}
	return 99
}

func exitFromEnv() int {
	if s := os.Getenv("EXIT_SIGNAL"); s != "" {
		n, _ := strconv.Atoi(s)
		syscall.Kill(os.Getpid(), syscall.Signal(n))
		select {}
	}
	n, _ := strconv.Atoi(os.Getenv("EXIT_CODE"))
	return n
}

// testServer runs a poold in this process serving programs, on a socket in
// a temporary directory, with the reduce ticker off.
func testServer(t *testing.T, cfg *contract.PooldConfig, opt Options) (*Server, string) {
	t.Helper()
	srv, sock, stop := startServer(t, cfg, opt)
	t.Cleanup(stop)
	return srv, sock
}

// startServer is testServer with the stop left to the caller.
func startServer(t *testing.T, cfg *contract.PooldConfig, opt Options) (*Server, string, func()) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "poold.sock")
	cfg.Socket = sock
	if opt.Log == nil {
		opt.Log = testLogger(t)
	}
	opt.NoTicker = true
	srv, stop, err := Start(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	return srv, sock, stop
}

func selfProgram(t *testing.T, name string, min int) contract.Program {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return contract.Program{Name: name, Path: exe, MinIdle: min, MaxIdle: min + 2, Allow: []string{"uid:0", fmt.Sprintf("uid:%d", os.Getuid())}}
}

// wantNoZombies fails t when a child of this process stays unreaped for
// 10 s: one that exited a moment ago (a parked process replaced, a served
// one just done) is reaped by then, a leaked one never is.
func wantNoZombies(t *testing.T) {
	t.Helper()
	z := zombies()
	for deadline := time.Now().Add(10 * time.Second); len(z) != 0 && time.Now().Before(deadline); z = zombies() {
		time.Sleep(5 * time.Millisecond)
	}
	if len(z) != 0 {
		t.Errorf("zombies left for 10 s: %v", z)
	}
}

// zombies lists this process's children that exited and were not reaped.
func zombies() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[0] == "Z" && f[1] == me {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func countFds(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		for _, e := range ents {
			l, _ := os.Readlink("/proc/self/fd/" + e.Name())
			t.Logf("fd %s -> %s", e.Name(), l)
		}
	}
	return len(ents)
}

// A connection's server side closes once its handler read the client's end
// of file, after the client had its answer: descriptor counts settle, and
// are compared once they did.

// settledFds counts the process's descriptors once the count stopped
// changing.
func settledFds(t *testing.T) int {
	t.Helper()
	n := countFds(t)
	for range 100 {
		time.Sleep(20 * time.Millisecond)
		m := countFds(t)
		if m == n {
			return n
		}
		n = m
	}
	return n
}

// wantFds fails the test unless the descriptor count comes back to want
// (or below: the baseline may have caught a transient one, e.g. a runtime
// or test-server descriptor) within 10 s: one more still open then is a leak.
func wantFds(t *testing.T, want int) {
	t.Helper()
	n := countFds(t)
	for deadline := time.Now().Add(10 * time.Second); n > want && time.Now().Before(deadline); n = countFds(t) {
		time.Sleep(10 * time.Millisecond)
	}
	if n > want {
		t.Errorf("descriptors: %d after, %d before", n, want)
	}
}

// killParked kills the oldest parked process of program name from outside,
// as a crash would, and returns once poold has reaped it.
func killParked(t *testing.T, srv *Server, name string) {
	t.Helper()
	pr, _ := srv.lookup(name)
	pr.pool.mu.Lock()
	if len(pr.pool.idle) == 0 {
		pr.pool.mu.Unlock()
		t.Fatalf("no parked process of %s to kill", name)
	}
	victim := pr.pool.idle[0].e.(*proc)
	pr.pool.mu.Unlock()
	syscall.Kill(victim.pid, syscall.SIGKILL)
	<-victim.reaped
}
