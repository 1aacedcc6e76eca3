package bootstat

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// ReadDisk and Procs over a made-up /proc and /sys: the disk's reads, and
// per process its faults and its read-only file mappings (not the writable
// one, not the anonymous read-only one), kernel threads and bootstat itself
// left out.
func TestReadDiskProcs(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sys/block/vda/stat", "     310        5    20480      812        0        0        0        0        0      900      812        0        0        0        0        0        0\n")
	write("proc/1/cmdline", "/sbin/nvinit\x00")
	write("proc/2/cmdline", "") // a kernel thread
	write("proc/2/stat", "2 (kthreadd) S 0 0 0 0 -1 0 0 0 0 0 0 0 0 0")
	write("proc/"+strconv.Itoa(os.Getpid())+"/cmdline", "/bin/bootstat\x00-port\x008081\x00")
	write("proc/77/cmdline", "/bin/caddy\x00respond\x00")
	// comm with a space and a parenthesis, as a program may name itself.
	write("proc/77/stat", "77 (cad dy)) S 1 77 77 0 -1 4194560 9000 0 300 0 45 12 0 0 20 0 5 0 16 1 1 18446744073709551615")
	write("proc/77/smaps", `00400000-01bd5000 r-xp 00000000 fe:02 12 /bin/caddy
Size:              24404 kB
Rss:                6000 kB
Pss:                6000 kB
01bd5000-039a5000 r--p 017d5000 fe:02 12 /bin/caddy
Size:              30528 kB
Rss:                3000 kB
039a5000-03b0e000 rw-p 035a5000 fe:02 12 /bin/caddy
Size:               1444 kB
Rss:                 900 kB
7ffd0000-7ffd2000 r--p 00000000 00:00 0 [vvar]
Size:                  8 kB
Rss:                   0 kB
`)
	reads, n, err := ReadDisk(root, "vda")
	if err != nil || reads != 310 || n != 20480*512 {
		t.Errorf("ReadDisk: %d reads, %d bytes, %v", reads, n, err)
	}
	if _, _, err := ReadDisk(root, "vdb"); err == nil {
		t.Error("a missing disk was not an error")
	}
	procs, err := Procs(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []Proc{{Name: "caddy", MinFlt: 9000, MajFlt: 300, CPUTicks: 57, TextMapped: (24404 + 30528) << 10, TextRSS: 9000 << 10}}
	if !reflect.DeepEqual(procs, want) {
		t.Errorf("Procs:\n got %+v\nwant %+v", procs, want)
	}
}

// A file just written is all in the page cache; a missing one is an error.
func TestCached(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 10000), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := cached(p); err != nil || n != 10000 {
		t.Errorf("cached: %d, %v; want 10000", n, err)
	}
	if _, err := cached(p + ".missing"); err == nil {
		t.Error("a missing file was not an error")
	}
}

func TestBy(t *testing.T) {
	st := &Stat{Samples: []Sample{{At: 100, Reads: 1, Bytes: 10}, {At: 200, Reads: 5, Bytes: 50}, {At: 300, Reads: 9, Bytes: 90}}}
	for _, c := range []struct {
		t     uint64
		reads uint64
		ok    bool
	}{{50, 0, false}, {100, 1, true}, {250, 5, true}, {1000, 9, true}} {
		if s, ok := st.By(c.t); ok != c.ok || s.Reads != c.reads {
			t.Errorf("By(%d) = %+v, %v; want %d reads, %v", c.t, s, ok, c.reads, c.ok)
		}
	}
}
