package poold

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

// needRoot skips a test that starts processes as other users or in
// cgroups.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

// testCgroup makes an empty cgroup v2 directory for the test and removes
// it, and whatever poold made below it, at cleanup (register it before the
// server, so the server stops first). It skips without a writable cgroup2.
func testCgroup(t *testing.T) (root, dir string) {
	t.Helper()
	needRoot(t)
	b, _ := os.ReadFile("/proc/self/mountinfo")
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) > 4 && len(g) > 0 && g[0] == "cgroup2" && f[3] == "/" {
			root = f[4]
			break
		}
	}
	if root == "" {
		t.Skip("no cgroup2 hierarchy mounted")
	}
	dir = filepath.Join(root, fmt.Sprintf("nvboot-poold-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-")))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a cgroup: %v", err)
	}
	t.Cleanup(func() {
		// Children first; a cgroup goes once its processes are reaped.
		var dirs []string
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil {
				t.Errorf("removing cgroup %s: %v", dirs[i], err)
			}
		}
	})
	return root, dir
}

// cgroupOf returns the cgroup v2 path of pid ("0::" line of /proc/pid/cgroup).
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p
		}
	}
	t.Fatalf("pid %d: no cgroup v2 line in\n%s", pid, b)
	return ""
}

// TestCgroup: with Cgroup set, parked processes, activated ones and those
// started on a miss are in it (poold creates it); CgroupMemoryMax becomes
// its memory.max, or, where the cgroup v2 hierarchy has no memory
// controller, a warning naming the cgroup and the value.
func TestCgroup(t *testing.T) {
	root, base := testCgroup(t)
	dir := filepath.Join(base, "pool")
	const memMax = 64 << 20
	prog := selfProgram(t, "child", 1)
	prog.Cgroup, prog.CgroupMemoryMax = dir, memMax
	lb := &logBuf{t: t}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true, Log: log.New(lb, "", 0)})
	srv.Fill()
	want := "/" + strings.TrimPrefix(dir, root+"/")
	pr, _ := srv.lookup("child")
	parked := pr.pool.idle[0].e.Pid()
	if got := cgroupOf(t, parked); got != want {
		t.Errorf("parked pid %d in cgroup %q, want %q", parked, got, want)
	}
	hit, _, _ := spawnBlock(t, sock, "child")
	miss, _, _ := spawnBlock(t, sock, "child")
	if !hit.Hit || miss.Hit {
		t.Fatalf("hit %v, miss %v: want a hit then a miss", hit.Hit, miss.Hit)
	}
	for _, p := range []int{hit.Pid, miss.Pid} {
		if got := cgroupOf(t, p); got != want {
			t.Errorf("activated pid %d in cgroup %q, want %q", p, got, want)
		}
	}
	ctrl, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	if hasWord(ctrl, "memory") {
		b, err := os.ReadFile(filepath.Join(dir, "memory.max"))
		if err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(memMax) {
			t.Errorf("memory.max %q, %v; want %d", b, err, memMax)
		}
	} else {
		w := fmt.Sprintf("program child: cgroup %s: memory.max not set to %d: the cgroup v2 hierarchy at %s has no memory controller", dir, memMax, root)
		if !strings.Contains(lb.String(), w) {
			t.Errorf("no memory controller in %s, and the log lacks %q:\n%s", root, w, lb.String())
		}
	}
	hit.Kill()
	miss.Kill()
	hit.Wait()
	miss.Wait()
}

// TestCgroupErrors: a Cgroup outside a cgroup v2 hierarchy, or a memory.max
// that cannot be written, fails the load naming the cgroup (and the value);
// a reload that fails so keeps the program's old pool.
func TestCgroupErrors(t *testing.T) {
	prog := selfProgram(t, "child", 0)
	notCgroup := filepath.Join(t.TempDir(), "cg")
	bad := prog
	bad.Cgroup = notCgroup
	_, err := New(&contract.PooldConfig{Programs: []contract.Program{bad}}, Options{ManualFill: true})
	if err == nil || !strings.Contains(err.Error(), "program child: cgroup "+notCgroup+": ") ||
		!strings.Contains(err.Error(), "is not in a cgroup v2 hierarchy") {
		t.Fatalf("Cgroup in a tmpdir: %v, want a load error naming it", err)
	}
	if _, err := os.Stat(notCgroup); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a directory was made for the refused cgroup: %v", err)
	}
	if _, err := ParseConfig([]byte(`{"Programs":[{"Name":"x","Path":"/x","CgroupMemoryMax":1}]}`)); err == nil ||
		!strings.Contains(err.Error(), "CgroupMemoryMax 1 needs Cgroup") {
		t.Fatalf("CgroupMemoryMax without Cgroup: %v", err)
	}

	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	before, _ := srv.lookup("child")
	err = srv.Reload(&contract.PooldConfig{Socket: sock, Programs: []contract.Program{bad}})
	if err == nil || !strings.Contains(err.Error(), notCgroup) {
		t.Fatalf("reload to a bad cgroup: %v", err)
	}
	if after, _ := srv.lookup("child"); after != before {
		t.Fatal("a reload that failed for a program replaced or dropped its pool")
	}
	spawnReport(t, sock)

	// The kernel refuses the memory controller below a cgroup that holds
	// processes ("no internal processes"): the error names the cgroup, the
	// value and the file.
	if os.Geteuid() != 0 {
		return
	}
	root, base := testCgroup(t)
	ctrl, _ := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if !hasWord(ctrl, "memory") {
		t.Log("no memory controller in cgroup v2 here: the refused case is not reachable")
		return
	}
	f, err := os.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sleep := exec.Command("sleep", "1000")
	sleep.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	if err := sleep.Start(); err != nil {
		t.Skipf("no sleep to hold the cgroup: %v", err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	dir := filepath.Join(base, "pool")
	_, err = openCgroup(dir, 1<<20, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "cgroup "+dir+": memory.max = 1048576") ||
		!strings.Contains(err.Error(), base+"/cgroup.subtree_control") {
		t.Fatalf("memory.max below a cgroup holding a process: %v, want an error naming cgroup, value and file", err)
	}
}
