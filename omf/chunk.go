package omf

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// dead marks a chunk being unmapped: acquire never takes a reference on it.
const dead = -1 << 30

// chunk is one shared read-only mapping of chunk bytes at off. refs counts
// the windows on it and the ReadAt calls copying from it.
type chunk struct {
	b    []byte
	off  int64
	refs atomic.Int32
}

// tryAcquire takes a reference unless the chunk is being unmapped. A CAS
// loop, not an Add: an Add could resurrect a chunk between Close's check
// and its munmap.
func (c *chunk) tryAcquire() bool {
	for {
		r := c.refs.Load()
		if r < 0 {
			return false
		}
		if c.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

func (c *chunk) release() { c.refs.Add(-1) }

// acquire returns chunk idx with a reference held, mapping it if it is not
// yet; a chunk mapped now has the file's bytes [lo, hi) populated (see
// mapRead). The fast path is two atomic loads and a CAS.
func (f *File) acquire(idx, lo, hi int64) (*chunk, error) {
	if s := *f.slots.Load(); idx < int64(len(s)) {
		if c := s[idx].Load(); c != nil && c.tryAcquire() {
			return c, nil
		}
	}
	return f.mapChunk(idx, lo, hi)
}

// mapChunk maps chunk idx under the lock. The whole chunk is mapped even
// where it passes the end of the file (mmap allows it), so a file that
// grows needs no second mapping; reads stop at the size.
func (f *File) mapChunk(idx, lo, hi int64) (*chunk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, fmt.Errorf("omf: %s: %w", f.name, ErrClosed)
	}
	s := *f.slots.Load()
	if idx < int64(len(s)) {
		if c := s[idx].Load(); c != nil && c.tryAcquire() {
			return c, nil
		}
	} else {
		// Grow the slot table; the old one stays valid for readers that
		// loaded it, and its chunks move to the new one.
		ns := make([]atomic.Pointer[chunk], max(idx+1, int64(len(s))*2))
		for i := range s {
			ns[i].Store(s[i].Load())
		}
		f.slots.Store(&ns)
		s = ns
	}
	b, err := f.mapRead(idx*f.chunk, int(f.chunk), lo, hi)
	if err != nil {
		return nil, err
	}
	c := &chunk{b: b, off: idx * f.chunk}
	c.refs.Store(1)
	s[idx].Store(c)
	return c, nil
}

// mapRead maps n bytes of the file at off read-only and, unless the File
// was opened NoPopulate, populates the file's bytes [lo, hi) of it, the
// window the caller is about to hand out, by touching a byte of each page
// (prefault). Not the whole mapping: on DAX with 2 MiB-aligned extents the
// first touch maps the whole chunk with one PMD entry anyway, and
// elsewhere every page is a fault of its own, so populating the chunk cost
// 512 faults for a window of 8 pages (1.9 ms against 52 µs, measured). On
// the page cache MAP_POPULATE of the chunk read 2 MiB from storage for the
// window, 64 times a 32 KiB one, where a touch lets the kernel's read-ahead
// decide. ReadAt passes an empty range: its copy touches the pages, under
// the guard.
func (f *File) mapRead(off int64, n int, lo, hi int64) ([]byte, error) {
	b, err := unix.Mmap(int(f.f.Fd()), off, n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("omf: mmap %s at %d (%d bytes): %w", f.name, off, n, err)
	}
	if f.populate {
		lo, hi = max(lo, off), min(hi, off+int64(n), f.size.Load())
		if lo < hi {
			prefault(b[lo-off : hi-off])
		}
	}
	return b, nil
}

// prefaultSink keeps prefault's loads from being optimised away.
var prefaultSink atomic.Uint32

// prefault reads a byte of every page of b, which the caller knows to be
// inside the file as last seen, so the kernel maps them now rather than at
// the reader's first touch. Touches, not MAP_POPULATE or
// MADV_POPULATE_READ: both populate through get_user_pages, which on DAX
// walks a mapping 4 KiB at a time even where one fault mapped the 2 MiB
// with a PMD entry (follow_devmap_pmd returns one page per call); on an
// ext4 whose extents are 2 MiB-aligned that walk cost 162 µs per 2 MiB of
// guest time at 1 GIPS, against 10 µs for one fault and 511 loads. A file
// truncated meanwhile raises SIGBUS at a touch: the guard stops the
// prefault, and the reader gets ErrTruncated where it reads.
func prefault(b []byte) {
	var s byte
	guard(func() {
		for i := 0; i < len(b); i += pageSize {
			s += b[i]
		}
	})
	prefaultSink.Add(uint32(s))
}

// Fault is the CPU fault a guarded access took: Addr is the address.
type Fault struct{ Addr uintptr }

func (e *Fault) Error() string { return fmt.Sprintf("memory fault at %#x", e.Addr) }

// guard runs fn with faults turned into panics (debug.SetPanicOnFault) and
// returns the fault as a *Fault. Reading a mapped page past the end of a
// truncated file raises SIGBUS, which would otherwise kill the process.
// SetPanicOnFault only sets a flag on the goroutine: no system call.
func guard(fn func()) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			a, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			err = &Fault{Addr: a.Addr()}
		}
	}()
	fn()
	return nil
}

// Guard runs fn, which reads Window.Bytes directly, and returns
// ErrTruncated (wrapping the *Fault) if it faulted: the file was truncated
// under the window. Any other panic goes on.
func Guard(fn func()) error {
	if err := guard(fn); err != nil {
		return fmt.Errorf("omf: %w (%w)", ErrTruncated, err)
	}
	return nil
}

var runtimeGosched = runtime.Gosched
