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
// yet. The fast path is two atomic loads and a CAS.
func (f *File) acquire(idx int64) (*chunk, error) {
	if s := *f.slots.Load(); idx < int64(len(s)) {
		if c := s[idx].Load(); c != nil && c.tryAcquire() {
			return c, nil
		}
	}
	return f.mapChunk(idx)
}

// mapChunk maps chunk idx under the lock. The whole chunk is mapped even
// where it passes the end of the file (mmap allows it), so a file that
// grows needs no second mapping; reads stop at the size.
func (f *File) mapChunk(idx int64) (*chunk, error) {
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
	flags := unix.MAP_SHARED
	if f.populate {
		flags |= unix.MAP_POPULATE
	}
	b, err := unix.Mmap(int(f.f.Fd()), idx*f.chunk, int(f.chunk), unix.PROT_READ, flags)
	if err != nil {
		return nil, fmt.Errorf("omf: mmap %s at %d (%d bytes): %w", f.name, idx*f.chunk, f.chunk, err)
	}
	c := &chunk{b: b, off: idx * f.chunk}
	c.refs.Store(1)
	s[idx].Store(c)
	return c, nil
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
