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
