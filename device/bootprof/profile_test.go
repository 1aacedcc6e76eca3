package bootprof

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/format/bootmark"
)

func TestSteps(t *testing.T) {
	now := time.Duration(0)
	s := &Steps{Uptime: func() time.Duration { now += time.Millisecond; return now }}
	s.Step("mounts-kernel")
	s.Step("store-mount")
	got := s.Marks()
	if len(got) != 2 || got[0] != (bootmark.Mark{Name: bootmark.Step, Arg: "mounts-kernel", Uptime: time.Millisecond}) ||
		got[1].Arg != "store-mount" || got[1].Uptime != 2*time.Millisecond {
		t.Fatalf("Marks = %+v", got)
	}
	for range maxSteps {
		s.Step("loop")
	}
	if n := len(s.Marks()); n != maxSteps {
		t.Errorf("%d steps kept, want at most %d", n, maxSteps)
	}
	var none *Steps
	none.Step("x") // a nil Steps times nothing, and does not panic
	if none.Marks() != nil {
		t.Error("a nil Steps has marks")
	}
}

func TestDumpRecords(t *testing.T) {
	kmsg := "7,1,20154,-;calling  init_hw_perf_events+0x0/0x60 @ 1\n SUBSYSTEM=x\n" +
		"7,2,20200,-;initcall init_hw_perf_events+0x0/0x60 returned 0 after 0 usecs\n" +
		"bad\n6,3,x,-;bad time\n"
	var lines []string
	dumpRecords(strings.NewReader(kmsg), func(s string) { lines = append(lines, s) })
	want := []bootmark.Record{
		{At: 20154 * time.Microsecond, Text: "calling  init_hw_perf_events+0x0/0x60 @ 1"},
		{At: 20200 * time.Microsecond, Text: "initcall init_hw_perf_events+0x0/0x60 returned 0 after 0 usecs"},
	}
	if len(lines) != len(want) {
		t.Fatalf("lines %q, want %d", lines, len(want))
	}
	for i, l := range lines {
		if r, ok := bootmark.ParseRecord(l); !ok || r != want[i] {
			t.Errorf("line %d %q: %+v, want %+v", i, l, r, want[i])
		}
	}
}

// A TCP dial binds before it connects (the kernel then skips its port
// perturbation table: see BoundDialer) and still reaches a loopback
// service; a unix dial has no local address to bind.
func TestBoundDialer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := BoundDialer("tcp", time.Second)
	if _, ok := d.LocalAddr.(*net.TCPAddr); !ok {
		t.Fatalf("LocalAddr %v: a TCP dial must bind first", d.LocalAddr)
	}
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if d := BoundDialer("unix", time.Second); d.LocalAddr != nil {
		t.Errorf("unix: LocalAddr %v", d.LocalAddr)
	}
}
