package pheap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/internal/dirsync"
	"github.com/nvboot/nvboot/pmem"
)

// mapping is the production Memory: a shared mapping of the heap file.
type mapping struct {
	b      []byte
	dax    bool // MAP_SYNC mapping and CPU flushes: the caches are all that is volatile
	lo, hi int  // msync mode: dirty range since the last fence
	err    error
}

func (m *mapping) Bytes() []byte { return m.b }

func (m *mapping) Flush(off, n int) {
	if n <= 0 {
		return
	}
	if m.dax {
		pmem.Flush(m.b[off : off+n])
		return
	}
	if m.hi == 0 {
		m.lo, m.hi = off, off+n
		return
	}
	m.lo, m.hi = min(m.lo, off), max(m.hi, off+n)
}

func (m *mapping) Fence() {
	if m.dax {
		pmem.Fence()
		return
	}
	if m.hi == 0 {
		return
	}
	lo := m.lo &^ (os.Getpagesize() - 1)
	if err := unix.Msync(m.b[lo:m.hi], unix.MS_SYNC); err != nil && m.err == nil {
		m.err = fmt.Errorf("msync: %w", err)
	}
	m.lo, m.hi = 0, 0
}

func (m *mapping) Err() error { return m.err }

func (m *mapping) Mode() string {
	if m.dax {
		return "dax"
	}
	return "msync"
}

// mapFile maps size bytes of f. MAP_SYNC is only accepted for files on a
// DAX filesystem (with MAP_SHARED_VALIDATE, so an unsupported flag fails
// instead of being ignored); elsewhere it fails with EOPNOTSUPP or EINVAL
// and the page cache mapping needs msync.
func mapFile(f *os.File, size int) (*mapping, error) {
	prot := unix.PROT_READ | unix.PROT_WRITE
	if pmem.Available() {
		b, err := unix.Mmap(int(f.Fd()), 0, size, prot, unix.MAP_SHARED_VALIDATE|unix.MAP_SYNC)
		if err == nil {
			return &mapping{b: b, dax: true}, nil
		}
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("mmap MAP_SYNC: %w", err)
		}
	}
	b, err := unix.Mmap(int(f.Fd()), 0, size, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return &mapping{b: b}, nil
}

// lockFile takes the exclusive lock that keeps a second Heap (in this or
// another process) off the file.
func lockFile(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return ErrLocked
		}
		return fmt.Errorf("flock: %w", err)
	}
	return nil
}

// Create makes a new heap file of the given size (rounded up to a page) and
// opens it. It refuses to overwrite an existing file.
//
// The heap is made under a temporary name beside path and linked to path
// only once it is whole and durable, so a power cut during Create leaves
// either no heap at path or a whole one: never a file of zeros that every
// later Open refuses. (link(2), unlike rename(2), fails when path exists,
// so a heap another process created meanwhile is never replaced.)
func Create(path string, size int64) (*Heap, error) {
	h, err := create(path, size)
	if err != nil {
		return nil, fmt.Errorf("pheap: create %s: %w", path, err)
	}
	return h, nil
}

// creatingName is where Create builds the heap for path.
func creatingName(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".creating")
}

func create(path string, size int64) (h *Heap, err error) {
	if size < MinSize {
		return nil, fmt.Errorf("%w: %d bytes, need at least %d", ErrTooSmall, size, MinSize)
	}
	size = (size + pageSize - 1) &^ (pageSize - 1)
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("open %s: %w", path, os.ErrExist)
	}
	tmp := creatingName(path)
	// No O_TRUNC before the lock: another Create of the same path may be
	// writing it. What a cut-short Create left is truncated once locked.
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := lockFile(f); err != nil {
		return nil, err
	}
	if err := f.Truncate(0); err != nil {
		return nil, err
	}
	// Allocate the blocks now so a full filesystem shows here, not as
	// SIGBUS on a later store; tmpfs and others without fallocate fall back.
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		if err := f.Truncate(size); err != nil {
			return nil, err
		}
	}
	m, err := mapFile(f, int(size))
	if err != nil {
		return nil, err
	}
	h, err = createMemory(m, path)
	if err != nil {
		unix.Munmap(m.b)
		return nil, err
	}
	if err := m.Err(); err != nil {
		unix.Munmap(m.b)
		return nil, err
	}
	if err := f.Sync(); err != nil { // the heap's bytes, size and blocks
		unix.Munmap(m.b)
		return nil, err
	}
	if err := os.Link(tmp, path); err != nil {
		unix.Munmap(m.b)
		return nil, err
	}
	os.Remove(tmp)
	if err := dirsync.Sync(filepath.Dir(path)); err != nil { // its name
		unix.Munmap(m.b)
		os.Remove(path)
		return nil, err
	}
	h.closer = closer(f, m)
	return h, nil
}

// Open opens an existing heap file, rolling back a transaction a crash
// interrupted. A file that is not a heap, of another format version,
// truncated, corrupt, or open elsewhere is refused with an error that
// matches one of the Err values, and is left unmodified. Open verifies the
// superblock, the log and the metadata before the arena, not the blocks
// (see "Checks" in the package documentation): ViewTx.Check does that.
func Open(path string) (*Heap, error) {
	h, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("pheap: open %s: %w", path, err)
	}
	return h, nil
}

func open(path string) (h *Heap, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.Close() // also drops the lock
		}
	}()
	if err := lockFile(f); err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// Check the superblock with a plain read before mapping anything.
	hdr := make([]byte, SuperblockSize)
	if n, err := f.ReadAt(hdr, 0); n < SuperblockSize {
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %d bytes, a heap needs at least %d", ErrTooSmall, fi.Size(), MinSize)
	}
	sb, err := decodeSuperblock(hdr)
	if err != nil {
		return nil, err
	}
	if sb.Size > uint64(fi.Size()) {
		return nil, fmt.Errorf("%w: superblock says %d bytes, file has %d", ErrTruncated, sb.Size, fi.Size())
	}
	m, err := mapFile(f, int(sb.Size))
	if err != nil {
		return nil, err
	}
	h, err = openMemory(m, path)
	if err == nil {
		err = m.Err()
	}
	if err != nil {
		unix.Munmap(m.b)
		return nil, err
	}
	h.closer = closer(f, m)
	return h, nil
}

func closer(f *os.File, m *mapping) func() error {
	return func() error {
		// Transactions already made their data durable; this catches a
		// failed msync reported late.
		err := m.Err()
		if e := unix.Munmap(m.b); e != nil && err == nil {
			err = fmt.Errorf("munmap: %w", e)
		}
		if e := f.Close(); e != nil && err == nil {
			err = e
		}
		return err
	}
}
