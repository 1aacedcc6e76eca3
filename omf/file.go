package omf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/pmem"
)

// Errors, for errors.Is.
var (
	// ErrTruncated: the file became shorter than a mapping used to read it;
	// the CPU faulted and the access was stopped.
	ErrTruncated = errors.New("file truncated under a mapping")
	// ErrBusy: Close while windows are still held.
	ErrBusy = errors.New("windows still held")
	// ErrReleased: Release of a window already released.
	ErrReleased = errors.New("window already released")
	// ErrClosed: the File is closed.
	ErrClosed = errors.New("file closed")
	// ErrReadOnly: a write or a sync on a File or window opened read-only.
	ErrReadOnly = errors.New("opened read-only")
	// ErrRange: a block range outside the file.
	ErrRange = errors.New("range outside the file")
)

// DefaultChunkSize is the unit in which a File maps for ReadBlock and
// ReadAt: 2 MiB, the x86-64 huge page, so an aligned DAX extent can be
// mapped by one PMD entry.
const DefaultChunkSize = 2 << 20

// BlockSize is the unit of ReadBlock and WriteBlock offsets: the page size,
// the smallest unit mmap can map at.
func BlockSize() int { return pageSize }

var pageSize = os.Getpagesize()

// Options tune Open; the zero value is read-only, 2 MiB chunks, populated.
type Options struct {
	// Writable opens the file O_RDWR, which WriteBlock and SyncBlock need.
	Writable bool
	// ChunkSize is the size of the mappings ReadBlock and ReadAt share; a
	// multiple of the page size. 0 means DefaultChunkSize.
	ChunkSize int
	// NoPopulate maps chunks without populating the window that maps
	// them (a touch of each of its pages): its pages are then faulted in
	// on first access (demand paging) instead of when it is made.
	NoPopulate bool
}

// File is a file opened for on-memory access. Its methods are safe for
// concurrent use.
type File struct {
	f        *os.File
	name     string
	writable bool
	dax      bool
	chunk    int64 // chunk size in bytes
	populate bool
	// noSync: the filesystem refused MAP_SYNC (EOPNOTSUPP) although the
	// file is DAX; WriteBlock maps plainly and SyncBlock calls msync.
	noSync atomic.Bool

	size atomic.Int64 // file size last seen (Open, or an fstat at EOF)

	// slots hold the mapped chunks, indexed by offset/chunk; read without
	// the lock on the fast path, replaced under mu.
	mu      sync.Mutex
	slots   atomic.Pointer[[]atomic.Pointer[chunk]]
	windows int // windows held: Close waits for none
	closed  bool
}

// Open opens path for on-memory access.
func Open(path string, o Options) (*File, error) {
	flag := os.O_RDONLY
	if o.Writable {
		flag = os.O_RDWR
	}
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("omf: open %s: %w", path, err)
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("omf: %w", err)
	}
	of, err := NewFile(f, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	return of, nil
}

func (o Options) check() error {
	if o.ChunkSize < 0 || o.ChunkSize%pageSize != 0 {
		return fmt.Errorf("chunk size %d is not a positive multiple of the page size %d", o.ChunkSize, pageSize)
	}
	return nil
}

// NewFile is Open for a file already open (from os.Root, say, which keeps
// a name inside its directory). The File owns f from then on and closes
// it in Close; f must be open for writing when o.Writable is set.
func NewFile(f *os.File, o Options) (*File, error) {
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("omf: open %s: %w", f.Name(), err)
	}
	cs := int64(o.ChunkSize)
	if cs == 0 {
		cs = DefaultChunkSize
	}
	size, dax, err := statFile(f)
	if err != nil {
		return nil, err
	}
	of := &File{f: f, name: f.Name(), writable: o.Writable, chunk: cs, populate: !o.NoPopulate}
	of.size.Store(size)
	of.dax = dax
	if dax && o.Writable && pmem.Available() && !probeDAX(f) {
		// A DAX file on an asynchronous device (virtio-pmem) refuses
		// MAP_SYNC: asked now, so Mode says from the start that SyncBlock
		// is an msync there (one mmap and munmap, for writable Files only).
		of.noSync.Store(true)
	}
	empty := make([]atomic.Pointer[chunk], 0)
	of.slots.Store(&empty)
	return of, nil
}

// statFile returns the size of f, a regular file, and whether it is on a
// DAX filesystem: the inode's DAX attribute from the statx the size comes
// from (Linux 5.8 on), so Open costs two system calls. A kernel that does
// not report the attribute is asked the slower way, probeDAX, and one
// without statx (before 4.11, or a seccomp filter that refuses it) is
// asked with fstat first.
func statFile(f *os.File) (size int64, dax bool, err error) {
	var st unix.Statx_t
	err = unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_TYPE|unix.STATX_SIZE, &st)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		fi, err := f.Stat()
		if err != nil {
			return 0, false, fmt.Errorf("omf: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return 0, false, fmt.Errorf("omf: open %s: not a regular file (%v)", f.Name(), fi.Mode().Type())
		}
		return fi.Size(), probeDAX(f), nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("omf: statx %s: %w", f.Name(), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, false, fmt.Errorf("omf: open %s: not a regular file (mode %#o)", f.Name(), st.Mode&unix.S_IFMT)
	}
	if st.Attributes_mask&unix.STATX_ATTR_DAX != 0 {
		return int64(st.Size), st.Attributes&unix.STATX_ATTR_DAX != 0, nil
	}
	return int64(st.Size), probeDAX(f), nil
}

// probeDAX reports whether the kernel accepts MAP_SYNC for the file (with
// MAP_SHARED_VALIDATE, so an unknown flag fails instead of being ignored,
// as pheap maps its heap): on a kernel before 5.8 only a DAX file does.
// An mmap and a munmap: the cost statFile avoids where it can.
func probeDAX(f *os.File) bool {
	b, err := unix.Mmap(int(f.Fd()), 0, pageSize, unix.PROT_READ, unix.MAP_SHARED_VALIDATE|unix.MAP_SYNC)
	if err != nil {
		return false
	}
	unix.Munmap(b)
	return true
}

// Name is the path the File was opened with.
func (f *File) Name() string { return f.name }

// DAX reports whether the file is on a DAX filesystem, where the mapping is
// the persistent memory and SyncBlock flushes CPU caches instead of calling
// msync (unless the filesystem refuses MAP_SYNC, as virtiofs and
// virtio-pmem do: then msync, see WriteBlock and Mode).
func (f *File) DAX() bool { return f.dax }

// Mode says how the file is mapped and how SyncBlock makes stores
// durable: "dax" (the pmem itself, MAP_SYNC, CPU cache flushes),
// "dax-msync" (a writable File on DAX whose device is asynchronous, as
// virtio-pmem is: the pmem mapped, msync the durability point, which the
// device turns into a flush request to its host) or "pagecache" (msync).
func (f *File) Mode() string {
	switch {
	case f.dax && f.noSync.Load():
		return "dax-msync"
	case f.dax:
		return "dax"
	}
	return "pagecache"
}

// Size is the file size as last seen: at Open, or by a read that reached
// the end and asked the kernel again.
func (f *File) Size() int64 { return f.size.Load() }

// refreshSize asks the kernel for the size: the only system call of a read
// at or past the end of the file as last seen.
func (f *File) refreshSize() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.f.Fd()), &st); err != nil {
		return 0, fmt.Errorf("omf: fstat %s: %w", f.name, err)
	}
	f.size.Store(st.Size)
	return st.Size, nil
}

// Close unmaps every chunk and closes the file. It refuses with ErrBusy
// while windows are held, and changes nothing then.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("omf: close %s: %w", f.name, ErrClosed)
	}
	if f.windows > 0 {
		return fmt.Errorf("omf: close %s: %d %w", f.name, f.windows, ErrBusy)
	}
	// Closed before the unmapping: a ReadAt racing with Close then maps
	// no new chunk while the lock is let go in unmapChunks.
	f.closed = true
	var errs []error
	if _, err := f.unmapChunks(true); err != nil {
		errs = append(errs, err)
	}
	if err := f.f.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("omf: close %s: %w", f.name, err)
	}
	return nil
}

// Unmap unmaps every chunk that no window holds and no ReadAt is copying
// from, and returns how many bytes of mappings it gave back. A File kept
// open for a file read once in a while, or in bursts, gives back its
// address space and page tables this way; the next read maps the chunk
// again (on aligned DAX one mmap and one fault). Held windows keep their
// chunks, and the File stays open.
func (f *File) Unmap() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, fmt.Errorf("omf: unmap %s: %w", f.name, ErrClosed)
	}
	n, err := f.unmapChunks(false)
	if err != nil {
		return n, fmt.Errorf("omf: unmap %s: %w", f.name, err)
	}
	return n, nil
}

// unmapChunks unmaps the chunks no one holds, with f.mu held, and returns
// the bytes unmapped. A chunk is taken only by swapping its count from 0
// to the dead mark, so a reader cannot take it between the check and the
// munmap. With wait (Close: no window is held, so a reference is a ReadAt
// still copying) it waits each reference out rather than skip the chunk.
func (f *File) unmapChunks(wait bool) (int64, error) {
	var n int64
	var errs []error
	for i := range *f.slots.Load() {
		c := (*f.slots.Load())[i].Load()
		if c == nil {
			continue
		}
		for !c.refs.CompareAndSwap(0, dead) {
			if !wait {
				break
			}
			f.mu.Unlock()
			runtimeGosched()
			f.mu.Lock()
		}
		if c.refs.Load() != dead {
			continue
		}
		(*f.slots.Load())[i].Store(nil)
		if err := unix.Munmap(c.b); err != nil {
			errs = append(errs, err)
			continue
		}
		n += int64(len(c.b))
	}
	return n, errors.Join(errs...)
}

// ReadAt copies len(p) bytes at off into p (io.ReaderAt). The chunks it
// reads are mapped on first touch; after that a read makes no system call
// unless it reaches the end of the file as last seen. A fault because the
// file was truncated under the mapping returns ErrTruncated.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("omf: read %s at %d: negative offset", f.name, off)
	}
	n := 0
	for n < len(p) {
		size := f.size.Load()
		if off >= size {
			var err error
			if size, err = f.refreshSize(); err != nil {
				return n, err
			}
			if off >= size {
				return n, io.EOF
			}
		}
		c, err := f.acquire(off/f.chunk, 0, 0)
		if err != nil {
			return n, err
		}
		start := off - c.off
		end := min(int64(len(c.b)), start+int64(len(p)-n), size-c.off)
		var m int
		ferr := guard(func() { m = copy(p[n:], c.b[start:end]) })
		c.release()
		if ferr != nil {
			return n, f.faulted(off, ferr)
		}
		n += m
		off += int64(m)
	}
	return n, nil
}

// faulted explains a fault at off: the file is shorter than the mapping.
func (f *File) faulted(off int64, fault error) error {
	size, err := f.refreshSize()
	if err != nil {
		return fmt.Errorf("omf: read %s at %d: %w (%v)", f.name, off, ErrTruncated, fault)
	}
	return fmt.Errorf("omf: read %s at %d: %w: now %d bytes (%v)", f.name, off, ErrTruncated, size, fault)
}
