package poold

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/nvboot/nvboot/device/contract"
)

func ptr(s []uint32) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

// testUID and testGID are who tests run processes and clients as: nobody.
const testUID, testGID = 65534, 65534

// worldBinary copies the test binary where any user may run it (go test
// builds it in a directory only its owner may enter).
func worldBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "poold-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	bin := filepath.Join(dir, "child")
	out, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// openSocket lets any user reach sock (testServer puts it two directories
// deep in the test's private temporary directory).
func openSocket(t *testing.T, sock string) {
	t.Helper()
	for _, d := range []string{filepath.Dir(sock), filepath.Dir(filepath.Dir(sock))} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
}

// asUser runs f as a client with uid, gid and no supplementary groups: it
// changes the credentials of this thread only (the raw system calls act
// per thread; poold reads the client's at connect, SO_PEERCRED and
// SO_PEERGROUPS), then changes them back.
func asUser(t *testing.T, uid, gid int, f func()) {
	t.Helper()
	runtime.LockOSThread()
	groups := make([]uint32, 256)
	n, _, e := syscall.RawSyscall(syscall.SYS_GETGROUPS, uintptr(len(groups)), uintptr(ptr(groups)), 0)
	if e != 0 {
		t.Fatalf("getgroups: %v", e)
	}
	groups = groups[:n]
	set := func(trap, a, b, c uintptr) {
		if _, _, e := syscall.RawSyscall(trap, a, b, c); e != 0 {
			t.Fatalf("switching credentials (%d): %v", trap, e)
		}
	}
	keep := ^uintptr(0)
	set(syscall.SYS_SETGROUPS, 0, 0, 0)
	set(syscall.SYS_SETRESGID, keep, uintptr(gid), keep)
	set(syscall.SYS_SETRESUID, keep, uintptr(uid), keep) // the saved uid stays 0
	defer func() {
		set(syscall.SYS_SETRESUID, keep, 0, keep)
		set(syscall.SYS_SETRESGID, keep, 0, keep)
		set(syscall.SYS_SETGROUPS, uintptr(len(groups)), uintptr(ptr(groups)), 0)
		runtime.UnlockOSThread() // only once all is back: else the thread dies with the goroutine
	}()
	f()
}

// asUserStart is start run by a client with uid and gid.
func asUserStart(uid, gid int, start startFunc) startFunc {
	return func(t *testing.T, argv, env []string, dir string, files []*os.File) (ws syscall.WaitStatus, hit bool) {
		asUser(t, uid, gid, func() { ws, hit = start(t, argv, env, dir, files) })
		return ws, hit
	}
}

// ids reads the real/effective/saved/fs uids and gids and the supplementary
// groups of pid.
func ids(t *testing.T, pid int) (uid, gid, groups string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		v = strings.Join(strings.Fields(v), " ")
		switch k {
		case "Uid":
			uid = v
		case "Gid":
			gid = v
		case "Groups":
			groups = v
		}
	}
	return uid, gid, groups
}

func wantIDs(t *testing.T, what string, pid, uid, gid int) {
	t.Helper()
	u, g, groups := ids(t, pid)
	wu, wg := strings.TrimSpace(strings.Repeat(fmt.Sprint(uid)+" ", 4)), strings.TrimSpace(strings.Repeat(fmt.Sprint(gid)+" ", 4))
	if u != wu || g != wg || groups != "" {
		t.Errorf("%s pid %d: uids %q gids %q groups %q; want %q, %q, none", what, pid, u, g, groups, wu, wg)
	}
}

// TestUser: a program with User runs as that user, parked, activated and
// started on a miss, without supplementary groups.
func TestUser(t *testing.T) {
	needRoot(t)
	prog := selfProgram(t, "child", 1)
	prog.Path, prog.MaxIdle = worldBinary(t), 1
	prog.User = fmt.Sprintf("%d:%d", testUID, testGID)
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	srv.Fill()
	parked := parkedPids(srv, "child")
	if len(parked) != 1 {
		t.Fatalf("parked %v", parked)
	}
	wantIDs(t, "parked", parked[0], testUID, testGID)
	hit, _, _ := spawnBlock(t, sock, "child")
	miss, _, _ := spawnBlock(t, sock, "child")
	if !hit.Hit || miss.Hit {
		t.Fatalf("hit %v, miss %v: want a hit, then a miss", hit.Hit, miss.Hit)
	}
	wantIDs(t, "activated", hit.Pid, testUID, testGID)
	wantIDs(t, "missed", miss.Pid, testUID, testGID)
	hit.Kill()
	miss.Kill()
	hit.Wait()
	miss.Wait()
}

// TestPeerWithoutUser: with no User, a client that is not poold's user gets
// a process with its own credentials, not a parked one (poold's: root
// here); poold's own user is served from the pool.
func TestPeerWithoutUser(t *testing.T) {
	needRoot(t)
	prog := selfProgram(t, "child", 1)
	prog.Path, prog.MaxIdle, prog.Allow = worldBinary(t), 1, []string{"*"}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	openSocket(t, sock)
	srv.Fill()
	env := []string{envChild + "=report", "LD_LIBRARY_PATH=/nonexistent", "TMPDIR=/tmp/x"}

	// A client as nobody: a process as nobody, its environment as given
	// (nobody may set what it likes for itself).
	r := runChild(t, asUserStart(testUID, testGID, poolStartName(sock, "child")), []string{"r"}, env, "/", 0)
	if r.hit {
		t.Error("nobody was served by a parked process (root's)")
	}
	if !reflect.DeepEqual(r.rep.Env, env) {
		t.Errorf("nobody's own process saw env %q, want %q", r.rep.Env, env)
	}
	s := srv.Stats().Programs[0]
	if s.AsPeer != 1 || s.Idle != 1 || s.Hits != 0 {
		t.Errorf("stats %+v; want 1 as_peer, the parked process left alone", s.PoolState)
	}
	// Which uid it ran as: a blocking child read from outside.
	asUser(t, testUID, testGID, func() {
		p, _, _ := spawnBlock(t, sock, "child")
		wantIDs(t, "nobody's", p.Pid, testUID, testGID)
		p.Kill()
		p.Wait()
	})

	// poold's own user (root): a hit, as root.
	p, _, _ := spawnBlock(t, sock, "child")
	if !p.Hit {
		t.Error("root was not served from the pool")
	}
	wantIDs(t, "root's", p.Pid, 0, 0)
	p.Kill()
	p.Wait()
}

// TestUnsafeEnv: a process that runs with credentials other than its
// client's (User granted) does not get the variables a loader or libc obeys
// only outside setuid programs; one with the client's own keeps them all.
func TestUnsafeEnv(t *testing.T) {
	needRoot(t)
	prog := selfProgram(t, "child", 1)
	prog.Path, prog.MaxIdle, prog.Allow = worldBinary(t), 1, []string{"*"}
	prog.User = fmt.Sprintf("%d:%d", testUID, testGID)
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	openSocket(t, sock)
	kept := []string{envChild + "=report", "LANG=C", "PATH=/bin:/usr/bin", "LD=kept", "X_LD_PRELOAD=kept", "TMP=kept", "EMPTY="}
	unsafe := []string{"LD_PRELOAD=/nonexistent.so", "LD_LIBRARY_PATH=/x", "LD_AUDIT=/x", "GCONV_PATH=/x",
		"GLIBC_TUNABLES=glibc.malloc.check=3", "TMPDIR=/x", "TZDIR=/x", "LOCPATH=/x", "NLSPATH=/x", "HOSTALIASES=/x",
		"RES_OPTIONS=debug", "MALLOC_TRACE=/x", "NVBOOT_POOL_FD=3", "NVBOOT_POOL_EXEC=/bin/sh"}
	var env []string
	for i := range max(len(kept), len(unsafe)) {
		if i < len(kept) {
			env = append(env, kept[i])
		}
		if i < len(unsafe) {
			env = append(env, unsafe[i])
		}
	}
	for _, hit := range []bool{true, false} {
		if hit {
			srv.Fill()
		}
		r := runChild(t, poolStartName(sock, "child"), []string{"r"}, env, "/", 0)
		if r.hit != hit {
			t.Fatalf("hit %v, want %v", r.hit, hit)
		}
		if !reflect.DeepEqual(r.rep.Env, kept) {
			t.Errorf("root's spawn as nobody (hit %v) saw env\n%q\nwant\n%q", hit, r.rep.Env, kept)
		}
	}
	// nobody's spawn runs as nobody: nothing is removed but poold's own
	// variables, which no client may set.
	want := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "NVBOOT_POOL_") })
	r := runChild(t, asUserStart(testUID, testGID, poolStartName(sock, "child")), []string{"r"}, env, "/", 0)
	if !reflect.DeepEqual(r.rep.Env, want) {
		t.Errorf("nobody's spawn as nobody saw env\n%q\nwant\n%q", r.rep.Env, want)
	}
}
