// Command hello is the small Go program of bench/spawn: the first thing its
// main does is write CLOCK_MONOTONIC (8 bytes, little-endian) to stdout; then
// it exits. It imports pool, so poold can park it, and declares itself
// reusable (pool.Reusable: main runs again per activation where poold's
// config allows it); os/exec runs it as is.
package main

import (
	"encoding/binary"
	"os"

	"github.com/nvboot/nvboot/bench/spawn/mono"
	"github.com/nvboot/nvboot/pool"
)

func main() {
	pool.Reusable()
	t := mono.Now()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(t))
	os.Stdout.Write(b[:])
}
