package nvinit

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestFormatMark(t *testing.T) {
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
		got := FormatMark(tc.name, tc.arg, tc.up)
		if got != tc.want {
			t.Errorf("FormatMark(%q, %q, %v) = %q, want %q", tc.name, tc.arg, tc.up, got, tc.want)
		}
		m, ok := ParseMark("\x1b[0m" + got + "\r")
		if !ok || m.Name != tc.name || m.Arg != tc.arg || m.Uptime != tc.up.Truncate(time.Microsecond) {
			t.Errorf("ParseMark(%q) = %+v, %v", got, m, ok)
		}
	}
}

func TestParseMarkRejects(t *testing.T) {
	for _, line := range []string{
		"", "NVBOOT-MARK", "NVBOOT-MARK init", "NVBOOT-MARK init x", "NVBOOT-MARK init -1",
		"NVBOOT-MARK a b c 1", "NVBOOT-MARK in/it 1", "NVBOOT-MARKinit 1", "nvinit: NVBOOT-MARK",
	} {
		if m, ok := ParseMark(line); ok {
			t.Errorf("ParseMark(%q) = %+v, want no marker", line, m)
		}
	}
}

func TestConsoleMark(t *testing.T) {
	var b bytes.Buffer
	c := &Console{W: &b, Uptime: func() time.Duration { return 1500 * time.Microsecond }}
	c.Mark("service-ready", "kv")
	if got := b.String(); got != "NVBOOT-MARK service-ready kv 1500\n" {
		t.Errorf("console got %q", got)
	}
	if Uptime() <= 0 {
		t.Errorf("Uptime() = %v, want > 0", Uptime())
	}
}

func TestPrefixed(t *testing.T) {
	var b bytes.Buffer
	c := &Console{W: &b}
	w := c.Prefixed("kv")
	w.Write([]byte("hello\nwor"))
	w.Write([]byte("ld\r\n\npartial"))
	w.Close()
	want := "kv: hello\nkv: world\nkv: \nkv: partial\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	// A service that names itself, as Go commands do ("kv: serving on",
	// "kv: <error>" from main), is not named twice.
	b.Reset()
	w = c.Prefixed("kv")
	w.Write([]byte("kv: serving on :8080\nkv:no space\nkvx: other\n"))
	w.Close()
	if want := "kv: serving on :8080\nkv: kv:no space\nkv: kvx: other\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	w = c.Prefixed("x")
	w.Write([]byte(strings.Repeat("a", 2*maxLine+10)))
	w.Close()
	if n := strings.Count(b.String(), "\n"); n != 3 {
		t.Errorf("long line split into %d lines, want 3", n)
	}
}

func FuzzParseMark(f *testing.F) {
	f.Add("NVBOOT-MARK init 812345")
	f.Add("NVBOOT-MARK service-ready kv 900000")
	f.Fuzz(func(t *testing.T, line string) {
		m, ok := ParseMark(line)
		if !ok {
			return
		}
		// What parses formats to a line that parses the same.
		again, ok := ParseMark(FormatMark(m.Name, m.Arg, m.Uptime))
		if !ok || again != m {
			t.Fatalf("%q: %+v does not survive FormatMark/ParseMark: %+v %v", line, m, again, ok)
		}
	})
}
