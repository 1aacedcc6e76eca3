// textwalk touches every page of its own text and rodata (so all of it is
// faulted in), prints "faulted N pages, minflt M, walk W" (its minor
// faults in all, and the walk's), and with the argument "wait" waits for its
// stdin to close, so a test can look at its mappings while it runs.
package main

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// bigText keeps net/http (a few MiB of text) reachable so the text segment is
// over 2 MiB and is laid out for 2 MiB DAX mappings.
func bigText() {
	if len(os.Args) > 99 {
		http.ListenAndServe(os.Args[99], nil)
	}
}

func main() {
	bigText()
	b, _ := os.ReadFile("/proc/self/maps")
	var spans [][2]uint64
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || f[1][0] != 'r' || f[1][1] == 'w' || !strings.HasPrefix(f[5], "/") {
			continue
		}
		if strings.Contains(f[5], "ld-off2f") {
			continue
		}
		r := strings.SplitN(f[0], "-", 2)
		lo, _ := strconv.ParseUint(r[0], 16, 64)
		hi, _ := strconv.ParseUint(r[1], 16, 64)
		spans = append(spans, [2]uint64{lo, hi})
	}
	// Minor faults tell 4 KiB mappings (one fault each) from 2 MiB ones;
	// walk counts the walk's own, after the runtime's start touched what
	// it touched, and after every allocation.
	var before, after syscall.Rusage
	pages := 0
	h := sha256.New()
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for _, s := range spans {
		for a := s[0]; a < s[1]; a += 4096 {
			h.Write((*[64]byte)(unsafe.Pointer(uintptr(a)))[:])
			pages++
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	fmt.Printf("faulted %d pages, minflt %d, walk %d\n", pages, after.Minflt, after.Minflt-before.Minflt)
	if len(os.Args) > 1 && os.Args[1] == "wait" {
		bufio.NewReader(os.Stdin).ReadString('\n')
	}
}
