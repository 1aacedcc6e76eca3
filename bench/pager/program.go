package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/pager"
)

// The measured program: C = A × B for N×N float64 matrices, the textbook
// i-j-k loop, so B is walked column by column. It runs in a child process
// (`pager run`), moved into a memory cgroup by the parent before it is told
// to start (a line on stdin), and prints one JSON line of figures.

// matrix generators: small integers, so every sum is exact and the two
// systems' checksums must agree bit for bit.
func aElem(i, k int) float64 { return float64((i*3 + k) % 11) }
func bElem(k, j int) float64 { return float64((k + 2*j) % 13) }

func multiply(a, b, c []float64, n int) {
	for i := range n {
		for j := range n {
			var s float64
			for k := range n {
				s += a[i*n+k] * b[k*n+j]
			}
			c[i*n+j] = s
		}
	}
}

// gen is a matrix in natural (row-major) order made on the fly, an
// io.ReaderAt, so writing 8 MiB of data needs no 8 MiB buffer.
type gen struct {
	n int
	f func(i, j int) float64
}

func (g gen) ReadAt(p []byte, off int64) (int, error) {
	size := int64(g.n) * int64(g.n) * 8
	if off >= size {
		return 0, io.EOF
	}
	if off%8 != 0 {
		return 0, fmt.Errorf("gen: offset %d not element aligned", off)
	}
	n := 0
	for ; n+8 <= len(p) && off < size; n, off = n+8, off+8 {
		e := int(off / 8)
		binary.LittleEndian.PutUint64(p[n:], math.Float64bits(g.f(e/g.n, e%g.n)))
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// runResult is what one program run reports.
type runResult struct {
	System   string       `json:"system"`
	N        int          `json:"n"`
	SetupS   float64      `json:"setup_s"`                 // writing the data: the aligned layouts, or filling the arrays
	ComputeS float64      `json:"compute_s"`               // the product, and writing C back (Sync / msync)
	Checksum float64      `json:"checksum"`                // the sum of C
	Mode     string       `json:"mode"`                    // pager: userfaultfd or mmap (and why); linux: swap or file
	Features string       `json:"uffd_features,omitempty"` // pager: the kernel's userfaultfd features and what is used
	Stats    *pager.Stats `json:"stats,omitempty"`
	MajFlt   int64        `json:"majflt"` // major page faults of the process (getrusage)
}

// runProgram is the child: `pager run -system pager|linux -n N -budget B -dir D`.
func runProgram(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench/pager run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	system := fs.String("system", "pager", "pager, linux-swap or linux-file")
	n := fs.Int("n", 512, "matrix size")
	budget := fs.Int64("budget", 8<<20, "pager budget in bytes")
	dir := fs.String("dir", os.TempDir(), "where the data files go")
	goLimit := fs.Int64("go-limit", 2<<20, "Go runtime memory limit (debug.SetMemoryLimit) in bytes; 0: none, Go's defaults")
	wait := fs.Bool("wait", true, "wait for a line on stdin before starting (the parent sets the cgroup)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Both systems' children keep the Go heap small alike, so the cgroup's
	// limit is the matrices' budget plus the same runtime overhead.
	if *goLimit > 0 {
		debug.SetMemoryLimit(*goLimit)
	}
	if *wait {
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return fmt.Errorf("waiting for the start line: %w", err)
		}
	}
	var r runResult
	var err error
	switch *system {
	case "pager":
		r, err = runPager(*n, *budget, *dir)
	case "linux-swap", "linux-file":
		r, err = runLinux(*system, *n, *dir)
	default:
		return fmt.Errorf("-system %q: want pager, linux-swap or linux-file", *system)
	}
	if err != nil {
		return err
	}
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	r.MajFlt = ru.Majflt
	return json.NewEncoder(stdout).Encode(r)
}

func runPager(n int, budget int64, dir string) (runResult, error) {
	r := runResult{System: "pager", N: n}
	s := pager.Shape{Rows: n, Cols: n, Elem: 8}
	pa, pb, pc := filepath.Join(dir, "a.layout"), filepath.Join(dir, "b.layout"), filepath.Join(dir, "c.layout")
	start := time.Now()
	if err := pager.CreateLayout(pa, s, pager.Hint{Order: pager.RowMajor}, gen{n, aElem}); err != nil {
		return r, err
	}
	if err := pager.CreateLayout(pb, s, pager.Hint{Order: pager.ColumnMajor}, gen{n, bElem}); err != nil {
		return r, err
	}
	if err := pager.CreateLayout(pc, s, pager.Hint{Order: pager.RowMajor}, nil); err != nil {
		return r, err
	}
	r.SetupS = time.Since(start).Seconds()
	p, err := pager.New(pager.Config{Budget: budget})
	if err != nil {
		return r, err
	}
	r.Mode = p.Mode()
	if p.Reason() != "" {
		r.Mode += " (" + p.Reason() + ")"
	}
	r.Features = p.Features()
	var m [3]*pager.Region
	for i, path := range []string{pa, pb, pc} {
		if m[i], err = p.Map(path); err != nil {
			return r, err
		}
	}
	start = time.Now()
	multiply(m[0].Float64s(), m[1].Float64s(), m[2].Float64s(), n)
	if err := p.Sync(); err != nil {
		return r, err
	}
	r.ComputeS = time.Since(start).Seconds()
	for _, v := range m[2].Float64s() {
		r.Checksum += v
	}
	st := p.Stats()
	r.Stats = &st
	return r, p.Close()
}

// runLinux is the same program on memory the kernel pages: anonymous
// memory (swapped, "linux-swap") or, where there is no swap, a shared
// mapping of a file in natural order ("linux-file": the page cache is
// paged to the file instead of swap).
func runLinux(system string, n int, dir string) (runResult, error) {
	r := runResult{System: system, N: n, Mode: system}
	size := n * n * 8
	var mem [3][]byte
	start := time.Now()
	for i, g := range []*gen{{n, aElem}, {n, bElem}, nil} {
		var err error
		if system == "linux-swap" {
			if mem[i], err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
				return r, err
			}
			if g != nil {
				// Fill in place, a page at a time, as a program that
				// computes its input would.
				for off := 0; off < size; off += 4096 {
					g.ReadAt(mem[i][off:min(off+4096, size)], int64(off))
				}
			}
			continue
		}
		path := filepath.Join(dir, fmt.Sprintf("m%d", i))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return r, err
		}
		if g != nil {
			if _, err := io.Copy(f, io.NewSectionReader(g, 0, int64(size))); err != nil {
				return r, err
			}
		} else if err := f.Truncate(int64(size)); err != nil {
			return r, err
		}
		if err := f.Sync(); err != nil {
			return r, err
		}
		if mem[i], err = unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
			return r, err
		}
		f.Close()
	}
	r.SetupS = time.Since(start).Seconds()
	start = time.Now()
	multiply(f64(mem[0]), f64(mem[1]), f64(mem[2]), n)
	if system == "linux-file" {
		if err := unix.Msync(mem[2], unix.MS_SYNC); err != nil {
			return r, err
		}
	}
	r.ComputeS = time.Since(start).Seconds()
	for _, v := range f64(mem[2]) {
		r.Checksum += v
	}
	return r, nil
}

func f64(b []byte) []float64 { return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8) }
