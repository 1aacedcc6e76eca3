package poold

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

// madvPopulateRead is MADV_POPULATE_READ (Linux 5.14).
const madvPopulateRead = 22

// textRss returns the size and resident bytes of pid's executable text
// mapping (the r-xp mapping of /proc/pid/exe), from /proc/pid/smaps.
func textRss(t *testing.T, pid int) (size, rss int64) {
	t.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = len(f) >= 6 && f[1] == "r-xp" && f[5] == exe
			continue
		}
		if !in || len(f) < 2 {
			continue
		}
		var kb int64
		fmt.Sscan(f[1], &kb)
		switch f[0] {
		case "Size:":
			size += kb << 10
		case "Rss:":
			rss += kb << 10
		}
	}
	if size == 0 {
		t.Fatalf("pid %d: no r-xp mapping of %s in smaps", pid, exe)
	}
	return size, rss
}

// TestPrefault: a parked process of a Prefault program has its text
// resident before any activation; without Prefault it has only what its
// start touched.
func TestPrefault(t *testing.T) {
	// Probe the kernel on a page of this test's own text.
	page := uintptr(reflect.ValueOf(TestPrefault).Pointer()) &^ uintptr(os.Getpagesize()-1)
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, page, uintptr(os.Getpagesize()), madvPopulateRead); e == syscall.EINVAL {
		t.Skip("MADV_POPULATE_READ unsupported (Linux before 5.14)")
	}
	on, off := selfProgram(t, "on", 1), selfProgram(t, "off", 1)
	on.Prefault = true
	srv, _ := testServer(t, &contract.PooldConfig{Programs: []contract.Program{on, off}}, Options{ManualFill: true})
	srv.Fill()
	size, rss := textRss(t, parkedPids(srv, "on")[0])
	if rss < size*98/100 {
		t.Errorf("prefaulted: %d of %d bytes of text resident, want all", rss, size)
	}
	offSize, offRss := textRss(t, parkedPids(srv, "off")[0])
	t.Logf("text resident: prefault %d of %d, without %d of %d", rss, size, offRss, offSize)
	if offRss >= offSize*98/100 {
		t.Log("without prefault the text is all resident too (fault-around over a cached file): this run did not tell them apart")
	}
}
