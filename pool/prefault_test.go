package pool

import "testing"

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

// TestPrefaultSelf: the test binary's text and data are populated (Linux
// 5.14 or later; older kernels refuse the advice and nothing is done).
func TestPrefaultSelf(t *testing.T) {
	if n := prefaultSelf(); n <= 0 {
		t.Skip("MADV_POPULATE_READ/WRITE unsupported here")
	} else if n < 1<<20 {
		t.Errorf("populated %d bytes, less than the test binary's text", n)
	}
}
