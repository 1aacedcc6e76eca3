//go:build !amd64 && !arm64

package pmem

// No user-space flush on this architecture yet: the heap falls back to
// msync, which the kernel implements with the right cache maintenance.
var method = ""

func flushLines(addr, lines uintptr) {}

func fence() {}

func variants() map[string]func(addr, lines uintptr) { return nil }
