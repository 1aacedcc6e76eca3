package bootprof

import (
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/format/bootmark"
)

// A mark is one line, stamped with the uptime in whole microseconds, and
// reads back as the same mark.
func TestMark(t *testing.T) {
	for _, tc := range []struct {
		name, arg string
		up        time.Duration
		want      string
	}{
		{"init", "", 812345 * time.Microsecond, "NVBOOT-MARK init 812345"},
		{"mounts", "", 815 * time.Millisecond, "NVBOOT-MARK mounts 815000"},
		{"service-start", "kv", 830 * time.Millisecond, "NVBOOT-MARK service-start kv 830000"},
		{"service-ready", "kv", 900*time.Millisecond + 999*time.Nanosecond, "NVBOOT-MARK service-ready kv 900000"},
		{"shutdown", "", 5 * time.Second, "NVBOOT-MARK shutdown 5000000"},
	} {
		var lines []string
		m := Marker{Line: func(s string) { lines = append(lines, s) }, Uptime: func() time.Duration { return tc.up }}
		m.Mark(tc.name, tc.arg)
		if len(lines) != 1 || lines[0] != tc.want {
			t.Errorf("Mark(%q, %q) at %v printed %q, want %q", tc.name, tc.arg, tc.up, lines, tc.want)
			continue
		}
		got, ok := bootmark.Parse("\x1b[0m" + lines[0] + "\r")
		if !ok || got.Name != tc.name || got.Arg != tc.arg || got.Uptime != tc.up.Truncate(time.Microsecond) {
			t.Errorf("bootmark.Parse(%q) = %+v, %v", lines[0], got, ok)
		}
	}
}

// Without an Uptime a mark is stamped with CLOCK_BOOTTIME.
func TestMarkUptime(t *testing.T) {
	if uptime() <= 0 {
		t.Fatalf("uptime() = %v, want > 0", uptime())
	}
	var line string
	Marker{Line: func(s string) { line = s }}.Mark("init", "")
	m, ok := bootmark.Parse(line)
	if !ok || m.Uptime <= 0 || !strings.HasPrefix(line, "NVBOOT-MARK init ") {
		t.Errorf("mark %q: %+v, %v", line, m, ok)
	}
}
