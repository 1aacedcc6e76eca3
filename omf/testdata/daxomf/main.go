// Command daxomf runs omf on a DAX mount in the QEMU guest of
// TestDAXWindows: `daxomf write FILE` writes a file, reads it through omf,
// stores through a writable window, SyncBlock, and says so; `daxomf verify
// FILE` reads the stores back after a power cut, reads windows between
// Unmaps, and checks truncation.
// Lines start with DAXOMF.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/omf"
)

const size = 4 << 20

func pattern() []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*13 + i>>12)
	}
	return b
}

// acceptsMapSync maps a page of path with MAP_SYNC (MAP_SHARED_VALIDATE,
// so an unknown flag is refused, not ignored).
func acceptsMapSync(path string) (bool, error) {
	h, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer h.Close()
	b, err := unix.Mmap(int(h.Fd()), 0, os.Getpagesize(), unix.PROT_READ, unix.MAP_SHARED_VALIDATE|unix.MAP_SYNC)
	if err != nil {
		return false, nil
	}
	return true, unix.Munmap(b)
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Printf("DAXOMF error %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: daxomf write|verify FILE")
	}
	path := args[1]
	want := pattern()
	bs := omf.BlockSize()
	marks := []int{0, bs - 1, 3*bs + 7, size - 1}
	switch args[0] {
	case "write":
		if err := os.WriteFile(path, want, 0o600); err != nil {
			return err
		}
		f, err := omf.Open(path, omf.Options{Writable: true})
		if err != nil {
			return err
		}
		fmt.Printf("DAXOMF mode %s\n", f.Mode())
		p := make([]byte, size)
		if _, err := f.ReadAt(p, 0); err != nil || !bytes.Equal(p, want) {
			return fmt.Errorf("ReadAt differs from the file (%v)", err)
		}
		w, err := f.WriteBlock(0, int64(size/bs))
		if err != nil {
			return err
		}
		for _, m := range marks {
			w.Bytes()[m] = ^want[m]
			if err := f.SyncBlock(w, m, 1); err != nil {
				return err
			}
		}
		if err := w.Release(); err != nil {
			return err
		}
		// No Close, no fsync: only SyncBlock (MAP_SYNC and the cache
		// flushes, or on an asynchronous device its msync) makes the
		// stores durable before the cut.
		fmt.Println("DAXOMF synced")
		select {}
	case "verify":
		f, err := omf.Open(path, omf.Options{Writable: true})
		if err != nil {
			return err
		}
		fmt.Printf("DAXOMF mode %s\n", f.Mode())
		// Open reads DAX from statx; the kernel's MAP_SYNC, which only a
		// DAX file on a synchronous device accepts, must agree with the
		// mode: dax where it is accepted, dax-msync where the device is
		// asynchronous (virtio-pmem).
		if probe, err := acceptsMapSync(path); err != nil || !f.DAX() || probe != (f.Mode() == "dax") {
			return fmt.Errorf("Open says DAX %v, mode %s, MAP_SYNC accepted %v (%v)", f.DAX(), f.Mode(), probe, err)
		}
		for _, m := range marks {
			want[m] = ^want[m]
		}
		p := make([]byte, size)
		if _, err := f.ReadAt(p, 0); err != nil || !bytes.Equal(p, want) {
			return fmt.Errorf("after the cut the file differs from what was synced (%v)", err)
		}
		// Windows inside one chunk, each after an Unmap: the chunk is
		// mapped again (on DAX populated just for the window) and reads
		// the pmem's bytes.
		for _, blk := range []int64{3, 700, 3, int64(size/bs) - 8} {
			w, err := f.ReadBlock(blk, 8)
			if err != nil {
				return err
			}
			lo := int(blk) * bs
			if !bytes.Equal(w.Bytes(), want[lo:lo+8*bs]) {
				return fmt.Errorf("window at block %d after Unmap differs from the file", blk)
			}
			w.Release()
			if n, err := f.Unmap(); err != nil || n == 0 {
				return fmt.Errorf("Unmap after block %d: %d bytes, %v", blk, n, err)
			}
		}
		w, err := f.ReadBlock(0, int64(size/bs))
		if err != nil {
			return err
		}
		if err := os.Truncate(path, int64(bs)); err != nil {
			return err
		}
		if err := w.Read(func(b []byte) { p[0] = b[size-1] }); !errors.Is(err, omf.ErrTruncated) {
			return fmt.Errorf("reading a window past a truncation on DAX: %v, want ErrTruncated", err)
		}
		fmt.Println("DAXOMF verified")
	}
	return nil
}
