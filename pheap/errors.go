package pheap

import "errors"

// Errors returned by Open, Create and transactions. They come wrapped with
// the path and the detail; test for them with errors.Is.
var (
	// ErrNotHeap: the file does not start with the pheap magic.
	ErrNotHeap = errors.New("not a pheap file (bad magic)")
	// ErrVersion: the file uses a format version or feature this package
	// does not read.
	ErrVersion = errors.New("unsupported format version")
	// ErrTooSmall: the file or requested size is below what a heap needs.
	ErrTooSmall = errors.New("too small")
	// ErrTruncated: the file is shorter than the heap its superblock describes.
	ErrTruncated = errors.New("file truncated")
	// ErrChecksum: a checksum does not match the bytes it covers.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrCorrupt: the metadata is inconsistent.
	ErrCorrupt = errors.New("heap corrupt")
	// ErrLocked: another process or Heap holds the file open.
	ErrLocked = errors.New("heap is open elsewhere (locked)")
	// ErrClosed: the Heap was closed.
	ErrClosed = errors.New("heap closed")
	// ErrNoSpace: the arena has no block large enough.
	ErrNoSpace = errors.New("out of heap space")
	// ErrLogFull: the transaction changed more than the undo log can save.
	ErrLogFull = errors.New("transaction too large for the undo log")
	// ErrNoRoot: a root looked up in a read-only transaction does not exist.
	ErrNoRoot = errors.New("no such root")
	// ErrRootType: a root exists with a different type.
	ErrRootType = errors.New("root has a different type")
	// ErrRootsFull: the root table has no free slot.
	ErrRootsFull = errors.New("root table full")
	// ErrBadPtr: a reference does not point at a live object of its type.
	ErrBadPtr = errors.New("invalid reference")
	// ErrNotPointerFree: a Go type holds pointers and cannot live in the heap.
	ErrNotPointerFree = errors.New("type is not pointer-free")
	// ErrIO: the operating system failed to make data durable.
	ErrIO = errors.New("I/O error making data durable")
)
