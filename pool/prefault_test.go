package pool

import (
	"os"
	"reflect"
	"syscall"
	"testing"
)

func TestParseMapsLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
		want mapping
	}{
		{"00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/hello\n", true, mapping{0x400000, 0x452000, "r-xp", "/usr/bin/hello"}},
		{"7ffd1000-7ffd2000 rw-p 00000000 00:00 0\n", true, mapping{0x7ffd1000, 0x7ffd2000, "rw-p", ""}},
		{"7ffd1000-7ffd2000 rw-p 00000000 00:00 0 [stack]\n", true, mapping{0x7ffd1000, 0x7ffd2000, "rw-p", ""}},
		{"2000-1000 rw-p 0 00:00 0\n", false, mapping{}},
		{"garbage\n", false, mapping{}},
	} {
		got, ok := parseMapsLine([]byte(tc.line))
		if ok != tc.ok || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPrefaultSelf: the test binary's text and data are populated. It
// skips only where the kernel does not know the advice (before Linux 5.14:
// EINVAL); any other failure fails.
func TestPrefaultSelf(t *testing.T) {
	page := uintptr(reflect.ValueOf(TestPrefaultSelf).Pointer()) &^ uintptr(os.Getpagesize()-1)
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, page, uintptr(os.Getpagesize()), madvPopulateRead); e == syscall.EINVAL {
		t.Skip("MADV_POPULATE_READ unsupported (Linux before 5.14)")
	} else if e != 0 {
		t.Fatalf("MADV_POPULATE_READ on our own text: %v", e)
	}
	if n := prefaultSelf(); n < 1<<20 {
		t.Errorf("populated %d bytes, less than the test binary's text", n)
	}
}
