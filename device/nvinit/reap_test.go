package nvinit

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReaperAll makes the test process a child subreaper, so an orphan lands
// on it as it lands on PID 1, and checks both exits are collected: the
// started child's by its handler, the orphan's by Orphan.
func TestReaperAll(t *testing.T) {
	const prSetChildSubreaper = 36
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		t.Skipf("PR_SET_CHILD_SUBREAPER: %v", e)
	}
	defer syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0)
	r, w, _ := os.Pipe()
	defer r.Close()
	got := make(chan string, 4)
	rp := &reaper{All: true, Orphan: func(pid int, ws syscall.WaitStatus) { got <- "orphan " + strconv.Itoa(pid) }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go rp.Run(ctx)
	argv := []string{"/bin/sh", "-c", "sleep 0.2 & echo $!; exit 7"}
	pid, err := rp.Start(func() (int, error) {
		return syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Files: []uintptr{0, w.Fd(), 2}})
	}, func(ws syscall.WaitStatus) { got <- "child " + strconv.Itoa(ws.ExitStatus()) })
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	var b [32]byte
	n, _ := r.Read(b[:])
	orphan := strings.TrimSpace(string(b[:n]))
	want := map[string]bool{"child 7": true, "orphan " + orphan: true}
	for range 2 {
		select {
		case s := <-got:
			if !want[s] {
				t.Errorf("reaped %q; want %v (child pid %d)", s, want, pid)
			}
			delete(want, s)
		case <-time.After(20 * time.Second):
			t.Fatalf("not reaped: %v", want)
		}
	}
}
