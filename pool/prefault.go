package pool

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// madvise advice values from linux/mman.h (Linux 5.14).
const (
	madvPopulateRead  = 22
	madvPopulateWrite = 23
)

// prefaultSelf faults in, before the process parks, what its first run would
// fault on the request path: every executable mapping of a file (the
// program's text; an OFF2F program's text mapped from pmem, which populating
// maps straight to the DAX pages) read-only, and the program's writable data
// and the bss after it for writing. It returns the number of bytes it
// populated.
func prefaultSelf() int {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	exe, _ := os.Readlink("/proc/self/exe")
	total := 0
	prevExe := false
	for line := range bytes.Lines(maps) {
		m, ok := parseMapsLine(line)
		if !ok {
			continue
		}
		isExe := exe != "" && m.path == exe
		switch {
		case m.path != "" && m.perms[2] == 'x':
			total += populate(m, madvPopulateRead)
		case isExe && m.perms[1] == 'w', prevExe && m.path == "" && m.perms[1] == 'w':
			// The program's data, and the anonymous bss right after it.
			total += populate(m, madvPopulateWrite)
		}
		prevExe = isExe
	}
	return total
}

type mapping struct {
	start, end uintptr
	perms      string
	path       string
}

// parseMapsLine reads "start-end perms offset dev inode path".
func parseMapsLine(line []byte) (mapping, bool) {
	f := bytes.Fields(line)
	if len(f) < 5 || len(f[1]) < 4 {
		return mapping{}, false
	}
	lo, hi, ok := bytes.Cut(f[0], []byte("-"))
	if !ok {
		return mapping{}, false
	}
	s, err1 := strconv.ParseUint(string(lo), 16, 64)
	e, err2 := strconv.ParseUint(string(hi), 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return mapping{}, false
	}
	m := mapping{start: uintptr(s), end: uintptr(e), perms: string(f[1])}
	if len(f) >= 6 && f[5][0] == '/' {
		m.path = string(f[5])
	}
	return m, true
}

func populate(m mapping, advice int) int {
	_, _, e := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, uintptr(advice))
	if e != 0 {
		return 0
	}
	return int(m.end - m.start)
}
