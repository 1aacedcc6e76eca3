// Package pmem makes stores to persistent memory durable: Flush writes the
// cache lines of a range back towards the memory (CLWB, else CLFLUSHOPT,
// else CLFLUSH) and Fence orders and completes those write-backs (SFENCE).
// On arm64 the pair is DC CVAP (else DC CVAC) and DSB SY; that port is only
// cross-compiled here, never run, and assumes 64-byte lines. Other
// architectures have no user-space flush and Available reports false.
//
// The pair is only a durability point on memory mapped with MAP_SYNC from a
// DAX filesystem (or on device DAX): there the CPU caches are the only
// volatile layer. On a page-cache mapping the caller needs msync instead;
// Available reports whether this architecture has user-space flushes at all.
package pmem

import "unsafe"

// LineSize is the cache-line size the flush instructions work on.
const LineSize = 64

// Flush writes back every cache line that overlaps b. It does not wait:
// call Fence before relying on the data being durable.
func Flush(b []byte) {
	if len(b) == 0 {
		return
	}
	FlushRange(uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
}

// FlushRange is Flush for the n bytes at addr.
func FlushRange(addr, n uintptr) {
	if n == 0 {
		return
	}
	start := addr &^ (LineSize - 1)
	flushLines(start, (addr+n-start+LineSize-1)/LineSize)
}

// Fence completes earlier flushes and orders them before later stores.
func Fence() { fence() }

// Available reports whether Flush and Fence are real instructions on this
// machine. When false they do nothing and durability needs msync.
func Available() bool { return method != "" }

// Method names the flush instruction in use: "clwb", "clflushopt",
// "clflush", "dc cvap", "dc cvac", or "" when there is none.
func Method() string { return method }
