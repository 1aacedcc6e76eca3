// Package bootstat is what bench/bigapp's diagnostic service (cmd/bootstat)
// measures inside an appliance once the timed service answers: the reads
// from the disk, the page faults, and per process its faults, CPU time and
// resident read-only file mappings. bench/bigapp reads its one line
//
//	BOOTSTAT {"disk":"vda","disk_reads":...,"procs":[...]}
//
// from the console.
package bootstat

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Prefix starts the line bench/bigapp looks for on the console.
const Prefix = "BOOTSTAT "

// Stat is the line's JSON.
type Stat struct {
	Disk          string `json:"disk"`
	DiskReads     uint64 `json:"disk_reads"`      // read requests completed
	DiskReadBytes uint64 `json:"disk_read_bytes"` // sectors read × 512
	DiskReadMs    uint64 `json:"disk_read_ms"`    // time the reads were in flight, summed
	PgFault       uint64 `json:"pgfault"`         // every page fault since boot
	PgMajFault    uint64 `json:"pgmajfault"`      // those that waited for a read
	Procs         []Proc `json:"procs"`
}

// Proc is one process at the moment the service answered.
type Proc struct {
	Name     string `json:"name"` // the base name of argv[0]
	MinFlt   uint64 `json:"minflt"`
	MajFlt   uint64 `json:"majflt"`
	CPUTicks uint64 `json:"cpu_ticks"` // utime + stime, in USER_HZ
	// TextMapped and TextRSS sum the read-only, file-backed mappings
	// (r-x and r--): their size, and what of it is mapped in the page
	// tables now (touched, or mapped around a touched page).
	TextMapped uint64 `json:"text_mapped"`
	TextRSS    uint64 `json:"text_rss"`
}

// WaitAnswer returns once http://127.0.0.1:port/ answers below 500; a
// refused connect is tried first, it costs the booting guest less.
func WaitAnswer(port int, poll time.Duration) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for ; ; time.Sleep(poll) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		c.Close()
		resp, err := client.Get("http://" + addr + "/")
		if err != nil {
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 500 {
			return
		}
	}
}

// Collect reads the figures under root ("/"; tests pass a fake tree).
func Collect(root, disk string) (*Stat, error) {
	st := &Stat{Disk: disk}
	b, err := os.ReadFile(filepath.Join(root, "sys/block", disk, "stat"))
	if err != nil {
		return nil, err
	}
	// Documentation/block/stat.rst: read I/Os, read merges, read sectors, read ticks, ...
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return nil, fmt.Errorf("/sys/block/%s/stat: %d fields", disk, len(f))
	}
	st.DiskReads, st.DiskReadBytes, st.DiskReadMs = num(f[0]), num(f[2])*512, num(f[3])
	vm, err := keyed(filepath.Join(root, "proc/vmstat"))
	if err != nil {
		return nil, err
	}
	st.PgFault, st.PgMajFault = vm["pgfault"], vm["pgmajfault"]
	dirs, err := os.ReadDir(filepath.Join(root, "proc"))
	if err != nil {
		return nil, err
	}
	self := strconv.Itoa(os.Getpid())
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil || d.Name() == "1" || d.Name() == self {
			continue
		}
		p, ok := readProc(filepath.Join(root, "proc", d.Name()))
		if ok {
			st.Procs = append(st.Procs, p)
		}
	}
	sort.Slice(st.Procs, func(i, j int) bool { return st.Procs[i].Name < st.Procs[j].Name })
	return st, nil
}

// readProc reads one process; kernel threads (no argv) and processes gone
// meanwhile are skipped.
func readProc(dir string) (Proc, bool) {
	cmd, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil || len(cmd) == 0 {
		return Proc{}, false
	}
	p := Proc{Name: filepath.Base(string(bytes.SplitN(cmd, []byte{0}, 2)[0]))}
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Proc{}, false
	}
	// proc(5): the fields after the parenthesised comm, from state (3) on.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return Proc{}, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return Proc{}, false
	}
	// minflt is field 10, majflt 12, utime 14, stime 15; f[0] is field 3.
	p.MinFlt, p.MajFlt, p.CPUTicks = num(f[7]), num(f[9]), num(f[11])+num(f[12])
	sm, err := os.Open(filepath.Join(dir, "smaps"))
	if err != nil {
		return p, true
	}
	defer sm.Close()
	text := false
	sc := bufio.NewScanner(sm)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && len(fields[1]) == 4 {
			// A mapping's header: range perms offset dev inode [path].
			perms, inode := fields[1], fields[4]
			text = perms[1] == '-' && perms[0] == 'r' && inode != "0"
			continue
		}
		if !text {
			continue
		}
		switch fields[0] {
		case "Size:":
			p.TextMapped += num(fields[1]) << 10
		case "Rss:":
			p.TextRSS += num(fields[1]) << 10
		}
	}
	return p, true
}

// keyed reads a "key value" file such as /proc/vmstat.
func keyed(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]uint64{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			m[f[0]] = num(f[1])
		}
	}
	return m, nil
}

func num(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}
