package pager

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pageSize = os.Getpagesize()

// Config is a pager's budget and read unit.
type Config struct {
	// Budget is the bytes of region memory resident at once, over all
	// regions; at least 8 pages.
	Budget int64
	// RunPages is how many pages of the walk one fault reads, in one
	// read; 0 means 64 (256 KiB), and never more than a quarter of the
	// budget.
	RunPages int
	// NoUffd forces the mmap fallback (tests, and comparing the two).
	NoUffd bool
	// Buffered reads and writes layouts through the page cache instead of
	// O_DIRECT.
	Buffered bool
}

// Stats counts what the pager did.
type Stats struct {
	Faults      int64 // missing-page faults served
	WPFaults    int64 // write-protect faults (first write to a clean page)
	PagesIn     int64 // pages read from layouts
	Reads       int64 // read system calls for them
	PagesOut    int64 // dirty pages written back
	Evicted     int64 // pages dropped from memory
	MaxResident int64 // high-water mark of resident pages
}

// Pager serves regions within one budget.
type Pager struct {
	cfg      Config
	uffd     int // -1 in fallback mode
	stop     int // eventfd: Close wakes the handler
	wp       bool
	features uint64 // UFFDIO_API: every feature the kernel has
	wpNote   string // why writes are not tracked, or ""
	reason   string // why the fallback, or ""
	budget   int    // pages
	run      int    // pages per read
	mu       sync.Mutex
	regions  []*Region
	victims  []pageRef
	iov      [][]byte // writeBack's, reused as victims is
	resident int
	stats    Stats
	buf      []byte // staging for reads, run pages
	done     chan struct{}
	closed   bool
}

type pageRef struct {
	r *Region
	p int32
}

// Page states.
const (
	absent = iota
	clean
	dirty
)

// Region is a matrix mapped through a Pager.
type Region struct {
	pg    *Pager
	f     *os.File
	path  string
	h     header
	mem   []byte  // the region: rows*cols*elem bytes rounded to pages
	pos   []int32 // region page -> data page of the layout (walk position)
	walk  []int32 // walk position -> region page
	units []int32 // start positions of the walk's units (walk)
	state []uint8 // by region page: absent, clean, dirty; | chosen while being evicted

	// Where the program is, as the faults show (evict.go).
	last    int32 // walk position of the last missing fault
	wrapped bool  // a fault went back to an earlier unit: the walk repeats
	// spill is 1 where a row of the matrix does not end on a page: a
	// unit's first and last pages are then shared with its neighbours,
	// and the program in one unit still touches them (evict.go).
	spill  int32
	lo, hi int32 // no resident page below lo or above hi
	wp     bool  // pages are installed write-protected to track writes

	// The read-ahead of a region walked once (serve.go, adapt).
	pass       uint32   // passes over the walk so far: a fault behind the last starts one
	loaded     []uint32 // by region page: the pass it was last loaded in, 0 never
	ra         int      // pages the next run reads, 1 to the pager's run
	raLo, raHi int32    // walk positions of the last run: [raLo, raHi)
}

func directFlag(on bool) int {
	if on {
		return unix.O_DIRECT
	}
	return 0
}

// New starts a pager. When userfaultfd is not available it still succeeds
// in fallback mode (Mode "mmap"; Reason says why).
func New(c Config) (*Pager, error) {
	budget := int(c.Budget / int64(pageSize))
	if budget < 8 {
		return nil, fmt.Errorf("pager: budget %d bytes: want at least 8 pages (%d bytes)", c.Budget, 8*pageSize)
	}
	run := c.RunPages
	if run == 0 {
		run = 64
	}
	if run < 1 {
		return nil, fmt.Errorf("pager: run of %d pages: want at least 1", c.RunPages)
	}
	run = min(run, budget/4)
	p := &Pager{cfg: c, uffd: -1, budget: budget, run: run, done: make(chan struct{})}
	if c.NoUffd {
		p.reason = "Config.NoUffd"
		return p, nil
	}
	fd, wp, avail, err := openUffd()
	if err != nil {
		p.reason = err.Error()
		if errors.Is(err, unix.ENOSYS) {
			p.reason += " (kernel built without CONFIG_USERFAULTFD)"
		} else if errors.Is(err, unix.EPERM) {
			p.reason += " (not permitted: root, CAP_SYS_PTRACE or vm.unprivileged_userfaultfd=1)"
		}
		return p, nil
	}
	if p.stop, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pager: eventfd: %w", err)
	}
	p.uffd, p.wp, p.features = fd, wp, avail
	if !wp {
		p.wpNote = "the kernel has no UFFD_FEATURE_PAGEFAULT_FLAG_WP (Linux 5.7+, CONFIG_HAVE_ARCH_USERFAULTFD_WP): every resident page counts as dirty"
	}
	p.buf = alignedBuf(run * pageSize)
	// writeBack's, at a run's length from the start: grown by append
	// (1, 2, 4, ...) it could end above the run and never be kept.
	p.iov = make([][]byte, 0, run)
	// Touched now, not by the first long run: the pager's memory is then
	// the budget plus a fixed overhead from the start, which is what a
	// memory cgroup sized from a small run (bench/pager's slack) sees.
	for i := 0; i < len(p.buf); i += pageSize {
		p.buf[i] = 0
	}
	// The handler is a goroutine: a thread blocked in a fault on a region
	// keeps its P, so with one P the handler would wait for the runtime to
	// preempt the faulting goroutine (10 ms and more) at every fault.
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	go p.serve()
	return p, nil
}

// alignedBuf returns n bytes at a page-aligned address (UFFDIO_COPY wants
// its source page aligned too), outside the Go heap.
func alignedBuf(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		panic(fmt.Sprintf("pager: mmap staging buffer: %v", err))
	}
	return b
}

// Mode is "userfaultfd" or "mmap" (the fallback).
func (p *Pager) Mode() string {
	if p.uffd >= 0 {
		return "userfaultfd"
	}
	return "mmap"
}

// Reason says why the pager runs in fallback mode; "" when it does not.
func (p *Pager) Reason() string { return p.reason }

// WriteTracking reports whether written pages are found by write-protect
// faults; without them every page of a region is written back on
// eviction and Sync (Features says why).
func (p *Pager) WriteTracking() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wp && p.wpNote == ""
}

// Features describes what the kernel's userfaultfd offers and what the
// pager uses of it; "" in fallback mode.
func (p *Pager) Features() string {
	if p.uffd < 0 {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	s := fmt.Sprintf("UFFDIO_API features %#x: write-protect faults %s, WP_UNPOPULATED %s (not needed)",
		p.features, yes(p.features&uffdFeaturePagefaultFlagWP != 0), yes(p.features&uffdFeatureWPUnpopulated != 0))
	if p.wpNote != "" {
		s += "; " + p.wpNote
	}
	return s
}

// Stats returns the counters so far.
func (p *Pager) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Map opens the layout at path (CreateLayout) and maps its matrix into a
// new region of this pager. Bytes is then the matrix, row-major.
func (p *Pager) Map(path string) (*Region, error) {
	r, err := p.mapLayout(path)
	if err != nil {
		return nil, fmt.Errorf("pager: map %s: %w", path, err)
	}
	return r, nil
}

func (p *Pager) mapLayout(path string) (*Region, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, errors.New("the pager is closed")
	}
	// The budget is the pager's cache: its reads and write-backs go
	// around the page cache (O_DIRECT, as swap I/O does), so the data is
	// not held twice and every miss is a read of the storage. Where the
	// filesystem refuses O_DIRECT (tmpfs), buffered.
	direct := p.uffd >= 0 && !p.cfg.Buffered
	f, err := os.OpenFile(path, os.O_RDWR|directFlag(direct), 0)
	if direct && errors.Is(err, unix.EINVAL) {
		f, err = os.OpenFile(path, os.O_RDWR, 0)
	}
	if err != nil {
		return nil, err
	}
	r := &Region{pg: p, f: f, path: path}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	hb := alignedBuf(pageSize) // O_DIRECT reads whole aligned pages
	_, err = f.ReadAt(hb, 0)
	if err == nil {
		r.h, err = decodeHeader(hb[:headerSize], pageSize)
	} else {
		err = fmt.Errorf("%w: reading the header: %v", ErrLayout, err)
	}
	unix.Munmap(hb)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if want := int64(pageSize) * (1 + r.h.pages); st.Size() != want {
		return nil, fmt.Errorf("%w: %d bytes, the header says %d", ErrLayout, st.Size(), want)
	}
	r.walk, r.units = walk(r.h.shape, r.h.hint, pageSize)
	if int64(r.h.shape.Cols)*int64(r.h.shape.Elem)%int64(pageSize) != 0 {
		r.spill = 1
	}
	r.lo, r.hi = int32(len(r.walk)), -1
	r.pos = make([]int32, len(r.walk))
	for k, pg := range r.walk {
		r.pos[pg] = int32(k)
	}
	size := int(r.h.pages) * pageSize
	if p.uffd < 0 {
		if err := r.mapFallback(size); err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.regions = append(p.regions, r)
		p.mu.Unlock()
		ok = true
		return r, nil
	}
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("mmap region of %d bytes: %w", size, err)
	}
	// No transparent huge pages: the pager's unit is the page.
	unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
	wp := p.wp
	err = register(p.uffd, addrOf(mem), uintptr(size), wp)
	if wp && errors.Is(err, unix.EINVAL) {
		// The API offered WP but this mapping cannot have it: track
		// no writes here rather than fail, and say so.
		wp = false
		err = register(p.uffd, addrOf(mem), uintptr(size), false)
		if err == nil {
			p.mu.Lock()
			p.wpNote = "UFFDIO_REGISTER refused MODE_WP for a region: its resident pages count as dirty"
			p.mu.Unlock()
		}
	}
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	r.mem, r.state, r.wp = mem, make([]uint8, r.h.pages), wp
	r.loaded, r.ra, r.pass = make([]uint32, r.h.pages), p.run, 1
	p.mu.Lock()
	p.regions = append(p.regions, r)
	p.mu.Unlock()
	ok = true
	return r, nil
}

// mapFallback maps each layout page at its region page: a shared file
// mapping the kernel pages by itself. Runs of consecutive pages share one
// mapping.
func (r *Region) mapFallback(size int) error {
	base, err := unix.Mmap(-1, 0, size, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return fmt.Errorf("reserving %d bytes: %w", size, err)
	}
	for pg := 0; pg < len(r.pos); {
		n := 1
		for pg+n < len(r.pos) && r.pos[pg+n] == r.pos[pg]+int32(n) {
			n++
		}
		addr := addrOf(base) + uintptr(pg*pageSize)
		_, _, e := unix.Syscall6(unix.SYS_MMAP, addr, uintptr(n*pageSize), unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_SHARED|unix.MAP_FIXED, r.f.Fd(), uintptr(int64(pageSize)*(1+int64(r.pos[pg]))))
		if e != 0 {
			unix.Munmap(base)
			return fmt.Errorf("mmap page %d of the layout at region page %d: %w", r.pos[pg], pg, e)
		}
		pg += n
	}
	r.mem = base
	return nil
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// Bytes is the region: the matrix, row-major, Shape().Bytes() long.
func (r *Region) Bytes() []byte { return r.mem[:r.h.shape.Bytes()] }

// Float64s is the region as float64s (Elem must be 8).
func (r *Region) Float64s() []float64 {
	if r.h.shape.Elem != 8 {
		panic(fmt.Sprintf("pager: Float64s of %s with %d-byte elements", r.path, r.h.shape.Elem))
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&r.mem[0])), r.h.shape.Rows*r.h.shape.Cols)
}

// Shape and Hint are the layout's.
func (r *Region) Shape() Shape { return r.h.shape }
func (r *Region) Hint() Hint   { return r.h.hint }

// Sync writes the region's changes to its layout: in userfaultfd mode the
// pager's Sync (all regions); in fallback mode msync of the region.
func (r *Region) Sync() error {
	if r.pg.uffd >= 0 {
		return r.pg.Sync()
	}
	if err := unix.Msync(r.mem, unix.MS_SYNC); err != nil {
		return fmt.Errorf("pager: msync %s: %w", r.path, err)
	}
	return nil
}

// ReadAt copies region bytes at off into p, and WriteAt copies p into the
// region. Both copy with a plain Go loop, never with copy (memmove is
// assembly): a fault there could not be preempted by a stop-the-world
// while it waits for the handler (see Limits in the package documentation).
func (r *Region) ReadAt(p []byte, off int64) (int, error) {
	b := r.Bytes()
	if off < 0 || off > int64(len(b)) {
		return 0, fmt.Errorf("pager: read %s at %d: outside the %d-byte region", r.path, off, len(b))
	}
	n := min(len(p), len(b)-int(off))
	src := b[off : int(off)+n]
	//lint:ignore S1001 a Go loop, not copy: see above
	for i := range src {
		p[i] = src[i]
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt: see ReadAt.
func (r *Region) WriteAt(p []byte, off int64) (int, error) {
	b := r.Bytes()
	if off < 0 || off+int64(len(p)) > int64(len(b)) {
		return 0, fmt.Errorf("pager: write %s at %d+%d: outside the %d-byte region", r.path, off, len(p), len(b))
	}
	dst := b[off : int(off)+len(p)]
	//lint:ignore S1001 a Go loop, not copy: see ReadAt
	for i := range p {
		dst[i] = p[i]
	}
	return len(p), nil
}
