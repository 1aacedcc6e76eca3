package omf

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/pmem"
)

// Window is a []byte view of blocks of a File that aliases the mapping: a
// read-only window from ReadBlock or a writable one from WriteBlock. It is
// held until Release; the mapping under it is never unmapped before that.
type Window struct {
	f        *File
	b        []byte // the blocks asked for
	off      int64  // file offset of b[0]
	chunk    *chunk // the shared chunk b aliases; nil with own
	own      []byte // a mapping of the window's own (writable, or spanning chunks); nil if it aliases one chunk
	dax      bool   // own is MAP_SYNC: SyncBlock flushes CPU caches
	writable bool   // from WriteBlock
	released atomic.Bool
}

// Bytes is the window's memory. It is valid until Release and must not be
// used after it. Reading it directly does not guard against truncation of
// the file (see Read and Guard); writing it is a fault on a read-only
// window.
func (w *Window) Bytes() []byte { return w.b }

// Offset is the file offset of Bytes()[0].
func (w *Window) Offset() int64 { return w.off }

// Read runs fn on the window's bytes and returns ErrTruncated, not SIGBUS,
// if the file was truncated under it.
func (w *Window) Read(fn func(b []byte)) error {
	if w.released.Load() {
		return fmt.Errorf("omf: read window of %s at %d: %w", w.f.name, w.off, ErrReleased)
	}
	if err := guard(func() { fn(w.b) }); err != nil {
		return fmt.Errorf("omf: read window of %s at %d: %w (%w)", w.f.name, w.off, ErrTruncated, err)
	}
	return nil
}

// Release drops the window. The chunk under a read-only window stays
// mapped for the File; a window's own mapping is unmapped. A second
// Release is ErrReleased and does nothing.
func (w *Window) Release() error {
	if !w.released.CompareAndSwap(false, true) {
		return fmt.Errorf("omf: release window of %s at %d: %w", w.f.name, w.off, ErrReleased)
	}
	if w.chunk != nil {
		w.chunk.release()
	}
	var err error
	if w.own != nil {
		if e := unix.Munmap(w.own); e != nil {
			err = fmt.Errorf("omf: munmap window of %s at %d: %w", w.f.name, w.off, e)
		}
	}
	w.f.mu.Lock()
	w.f.windows--
	w.f.mu.Unlock()
	return err
}

// checkRange refuses a block range that is empty, negative or past the end
// of the file (asking the kernel for the size: mapping is a system call
// anyway).
func (f *File) checkRange(op string, blkoff, nblocks int64) (off, n int64, err error) {
	bs := int64(pageSize)
	if blkoff < 0 || nblocks <= 0 || blkoff > (1<<62)/bs || nblocks > (1<<62)/bs {
		return 0, 0, fmt.Errorf("omf: %s %s blocks %d+%d: %w", op, f.name, blkoff, nblocks, ErrRange)
	}
	off, n = blkoff*bs, nblocks*bs
	size, err := f.refreshSize()
	if err != nil {
		return 0, 0, err
	}
	// The last block may be partial: a window may reach into it.
	if off >= size || off+n > (size+bs-1)/bs*bs {
		return 0, 0, fmt.Errorf("omf: %s %s blocks %d+%d (bytes %d+%d) of a %d-byte file: %w", op, f.name, blkoff, nblocks, off, n, size, ErrRange)
	}
	return off, n, nil
}

// ReadBlock returns a read-only window on nblocks blocks (BlockSize bytes
// each) at block blkoff, aliasing the mapping. A range inside one chunk
// shares the chunk's mapping: once the chunk is mapped, ReadBlock makes no
// system call. A range across chunks gets a mapping of its own. The window
// stops at the end of the file when the last block is partial.
func (f *File) ReadBlock(blkoff, nblocks int64) (*Window, error) {
	bs := int64(pageSize)
	off, n := blkoff*bs, nblocks*bs
	size := f.size.Load()
	// A range past the size last seen (which a partial last block or a
	// grown file makes) asks the kernel again.
	if blkoff < 0 || nblocks <= 0 || blkoff > (1<<62)/bs || nblocks > (1<<62)/bs || off+n > size {
		var err error
		if off, n, err = f.checkRange("read", blkoff, nblocks); err != nil {
			return nil, err
		}
		size = f.size.Load()
	}
	n = min(n, size-off)
	w := &Window{f: f, off: off}
	if idx := off / f.chunk; (off+n-1)/f.chunk == idx {
		// The size is not asked again here: a file truncated since is
		// caught when the window is read (Read, Guard).
		c, err := f.acquire(idx, off, off+n)
		if err != nil {
			return nil, err
		}
		w.chunk = c
		w.b = c.b[off-c.off : off-c.off+n : off-c.off+n]
	} else {
		if _, _, err := f.checkRange("read", blkoff, nblocks); err != nil {
			return nil, err
		}
		b, err := f.mapRead(off, int(n), off, off+n)
		if err != nil {
			return nil, err
		}
		w.own, w.b = b, b[:n:n]
	}
	return w, f.hold(w)
}

// hold counts a new window, unless the File was closed meanwhile.
func (f *File) hold(w *Window) error {
	f.mu.Lock()
	closed := f.closed
	if !closed {
		f.windows++
	}
	f.mu.Unlock()
	if closed {
		w.released.Store(true)
		if w.chunk != nil {
			w.chunk.release()
		}
		if w.own != nil {
			unix.Munmap(w.own)
		}
		return fmt.Errorf("omf: %s: %w", f.name, ErrClosed)
	}
	return nil
}

// WriteBlock returns a writable window on nblocks blocks at blkoff, a
// mapping of its own: MAP_SYNC on DAX, so that SyncBlock's cache flushes
// are the durability point, and a plain shared mapping elsewhere and where
// the DAX filesystem refuses MAP_SYNC (SyncBlock then calls msync). Stores
// to it are visible to ReadAt and ReadBlock at once (one page cache, or
// the pmem itself); they are durable after SyncBlock. The range must lie
// within the file: WriteBlock does not grow it.
func (f *File) WriteBlock(blkoff, nblocks int64) (*Window, error) {
	if !f.writable {
		return nil, fmt.Errorf("omf: write %s: %w (open with Options.Writable)", f.name, ErrReadOnly)
	}
	off, n, err := f.checkRange("write", blkoff, nblocks)
	if err != nil {
		return nil, err
	}
	n = min(n, f.size.Load()-off)
	prot := unix.PROT_READ | unix.PROT_WRITE
	w := &Window{f: f, off: off, writable: true}
	if f.dax && pmem.Available() && !f.noSync.Load() {
		b, err := unix.Mmap(int(f.f.Fd()), off, int(n), prot, unix.MAP_SHARED_VALIDATE|unix.MAP_SYNC)
		if err == nil {
			w.own, w.b, w.dax = b, b[:n:n], true
			return w, f.hold(w)
		}
		// A DAX file whose device or filesystem is not synchronous
		// (virtio-pmem, virtiofs with DAX) refuses MAP_SYNC: msync is its
		// durability point. Remembered, so later windows map once.
		if !errors.Is(err, unix.EOPNOTSUPP) {
			return nil, fmt.Errorf("omf: mmap MAP_SYNC %s at %d (%d bytes): %w", f.name, off, n, err)
		}
		f.noSync.Store(true)
	}
	b, err := unix.Mmap(int(f.f.Fd()), off, int(n), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("omf: mmap %s at %d (%d bytes): %w", f.name, off, n, err)
	}
	w.own, w.b = b, b[:n:n]
	return w, f.hold(w)
}

// SyncBlock makes bytes [off, off+n) of the writable window w durable: on
// DAX by flushing their cache lines and a fence (pmem, as pheap does),
// elsewhere by msync(MS_SYNC) of the pages holding them.
func (f *File) SyncBlock(w *Window, off, n int) error {
	if w.f != f {
		return fmt.Errorf("omf: sync %s: the window belongs to %s", f.name, w.f.name)
	}
	return w.Sync(off, n)
}

// Sync is SyncBlock on the window's own File.
func (w *Window) Sync(off, n int) error {
	if w.released.Load() {
		return fmt.Errorf("omf: sync window of %s at %d: %w", w.f.name, w.off, ErrReleased)
	}
	if !w.writable {
		return fmt.Errorf("omf: sync window of %s at %d: %w (a ReadBlock window; use WriteBlock)", w.f.name, w.off, ErrReadOnly)
	}
	if off < 0 || n < 0 || off+n > len(w.b) {
		return fmt.Errorf("omf: sync window of %s at %d: bytes %d+%d of a %d-byte window: %w", w.f.name, w.off, off, n, len(w.b), ErrRange)
	}
	if n == 0 {
		return nil
	}
	if w.dax {
		pmem.Flush(w.b[off : off+n])
		pmem.Fence()
		return nil
	}
	lo := off &^ (pageSize - 1)
	if err := unix.Msync(w.own[lo:off+n], unix.MS_SYNC); err != nil {
		return fmt.Errorf("omf: msync %s bytes %d+%d: %w", w.f.name, w.off+int64(off), n, err)
	}
	return nil
}

// owns reports whether addr is inside the window's memory (tests).
func (w *Window) owns(addr uintptr) bool {
	if len(w.b) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(&w.b[0]))
	return addr >= lo && addr < lo+uintptr(len(w.b))
}
