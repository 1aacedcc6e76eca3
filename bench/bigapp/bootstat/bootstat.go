// Package bootstat is what bench/bigapp's diagnostic service (cmd/bootstat)
// measures inside an appliance: from its start until the timed service
// accepts connections it samples the disk's read counters against the
// guest's clock, then it takes a snapshot of every process (page faults,
// CPU time, resident read-only file mappings, how much of its program file
// is in the page cache). bench/bigapp reads its one line
//
//	BOOTSTAT {"disk":"vda","samples":[...],"procs":[...]}
//
// from the console and lines the samples up with nvinit's marks.
package bootstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Prefix starts the line bench/bigapp looks for on the console.
const Prefix = "BOOTSTAT "

// Stat is the line's JSON.
type Stat struct {
	Disk    string   `json:"disk"`
	Samples []Sample `json:"samples"` // oldest first; a sample is kept only when the counters moved
	At      uint64   `json:"at_us"`   // CLOCK_BOOTTIME of the snapshot of Procs
	Procs   []Proc   `json:"procs"`
}

// Sample is the disk's read counters at a moment of the guest's clock.
type Sample struct {
	At    uint64 `json:"t"`     // CLOCK_BOOTTIME in µs, as nvinit's marks
	Reads uint64 `json:"reads"` // read requests completed
	Bytes uint64 `json:"bytes"` // sectors read × 512
}

// Proc is one process at the snapshot.
type Proc struct {
	Name     string `json:"name"` // the base name of argv[0]
	MinFlt   uint64 `json:"minflt"`
	MajFlt   uint64 `json:"majflt"` // faults that waited for a read from the disk
	CPUTicks uint64 `json:"cpu_ticks"`
	// TextMapped and TextRSS sum the read-only, file-backed mappings (r-x
	// and r--): their size, and what of it the page tables map now (pages
	// touched, and those the kernel maps around a touched one). Pages of a
	// DAX file are not counted by smaps: under OFF2F and dax-elf the text
	// shows almost nothing.
	TextMapped uint64 `json:"text_mapped"`
	TextRSS    uint64 `json:"text_rss"`
	// FileCached is how much of the program's file (/proc/PID/exe: the
	// ELF, or an OFF2F program's header file) is in the page cache: read
	// from the disk, readahead included.
	FileCached uint64 `json:"file_cached"`
}

// Now is CLOCK_BOOTTIME in µs, the clock of nvinit's marks.
func Now() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano() / 1000)
}

// ReadDisk reads the disk's read counters under root ("/").
func ReadDisk(root, disk string) (reads, bytes uint64, err error) {
	b, err := os.ReadFile(filepath.Join(root, "sys/block", disk, "stat"))
	if err != nil {
		return 0, 0, err
	}
	// Documentation/block/stat.rst: read I/Os, read merges, read sectors, ...
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0, 0, fmt.Errorf("/sys/block/%s/stat: %d fields", disk, len(f))
	}
	return num(f[0]), num(f[2]) * 512, nil
}

// Procs reads every process under root ("/") but PID 1, self and kernel
// threads, sorted by name.
func Procs(root string) ([]Proc, error) {
	dirs, err := os.ReadDir(filepath.Join(root, "proc"))
	if err != nil {
		return nil, err
	}
	self := strconv.Itoa(os.Getpid())
	var out []Proc
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil || d.Name() == "1" || d.Name() == self {
			continue
		}
		if p, ok := readProc(filepath.Join(root, "proc", d.Name())); ok {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
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
	p.TextMapped, p.TextRSS = readOnlyMappings(filepath.Join(dir, "smaps"))
	p.FileCached, _ = cached(filepath.Join(dir, "exe"))
	return p, true
}

// readOnlyMappings sums Size and Rss of the read-only file mappings in an
// smaps file.
func readOnlyMappings(path string) (size, rss uint64) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	text := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && len(fields[1]) == 4 {
			// A mapping's header: range perms offset dev inode [path].
			perms, inode := fields[1], fields[4]
			text = perms[0] == 'r' && perms[1] == '-' && inode != "0"
			continue
		}
		if !text || len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "Size:":
			size += num(fields[1]) << 10
		case "Rss:":
			rss += num(fields[1]) << 10
		}
	}
	return size, rss
}

// cached is how many bytes of the file at path are in the page cache
// (mincore(2) over a mapping of it).
func cached(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	// x/sys has no Mincore for Linux; the raw call is mincore(2).
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, e
	}
	var n uint64
	for i, v := range vec {
		if v&1 == 0 {
			continue
		}
		if end := (i + 1) * page; end > len(m) {
			n += uint64(len(m) - i*page)
		} else {
			n += uint64(page)
		}
	}
	return n, nil
}

func num(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// By returns the disk's counters at t (µs of CLOCK_BOOTTIME): the last
// sample at or before it; ok is false when no sample is that early.
func (s *Stat) By(t uint64) (Sample, bool) {
	var last Sample
	ok := false
	for _, x := range s.Samples {
		if x.At > t {
			break
		}
		last, ok = x, true
	}
	return last, ok
}
