package nvinit

import (
	"bytes"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestConsoleMark(t *testing.T) {
	var b bytes.Buffer
	c := &console{W: &b, Uptime: func() time.Duration { return 1500 * time.Microsecond }}
	c.Mark("service-ready", "kv")
	if got := b.String(); got != "NVBOOT-MARK service-ready kv 1500\n" {
		t.Errorf("console got %q", got)
	}
}

func TestPrefixed(t *testing.T) {
	var b bytes.Buffer
	c := &console{W: &b}
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

func TestConsoleCommands(t *testing.T) {
	ch := make(chan os.Signal, 4)
	var logged []string
	consoleCommands(strings.NewReader("ls\n poweroff \nreboot\npoweroffx\n"), ch, func(f string, a ...any) { logged = append(logged, f) })
	close(ch)
	var got []os.Signal
	for s := range ch {
		got = append(got, s)
	}
	if len(got) != 2 || got[0] != syscall.SIGTERM || got[1] != syscall.SIGINT {
		t.Fatalf("signals %v, want SIGTERM then SIGINT", got)
	}
	if len(logged) != 2 {
		t.Fatalf("logged %v", logged)
	}
}
