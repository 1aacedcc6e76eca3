package pmem

import (
	"testing"
	"unsafe"
)

func TestFlushVariants(t *testing.T) {
	t.Logf("method %q", Method())
	buf := make([]byte, 4096+7)
	for i := range buf {
		buf[i] = byte(i)
	}
	for name, f := range variants() {
		t.Run(name, func(t *testing.T) {
			// Flushing must never change the data, whatever the alignment.
			for _, r := range [][2]int{{0, 1}, {3, 64}, {63, 2}, {1, 4096 + 6}} {
				addr := uintptr(unsafe.Pointer(&buf[r[0]]))
				start := addr &^ (LineSize - 1)
				f(start, (addr+uintptr(r[1])-start+LineSize-1)/LineSize)
			}
			Fence()
			for i := range buf {
				if buf[i] != byte(i) {
					t.Fatalf("byte %d changed", i)
				}
			}
		})
	}
	Flush(buf)
	Flush(nil)
	FlushRange(0, 0)
	Fence()
}

func TestAvailable(t *testing.T) {
	if Available() != (Method() != "") {
		t.Fatal("Available disagrees with Method")
	}
}
