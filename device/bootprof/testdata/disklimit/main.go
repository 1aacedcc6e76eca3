// Command disklimit applies the kernel command line's nvboot.disklimit as
// nvinit does (bootprof.ApplyDiskLimit), then times direct reads of the
// disk on the guest's clock: TestDiskLimitUnderDeviceClock holds them to
// the storage profile.
package main

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/bootprof"
	"github.com/nvboot/nvboot/device/contract"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "disklimit:", err)
		os.Exit(1)
	}
}

func run() error {
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return err
	}
	l, ok, err := contract.ParseDiskLimit(string(cmdline))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no %s on the command line", contract.DiskLimitParam)
	}
	line, err := bootprof.ApplyDiskLimit(l, syscall.Mount, "/sys", "/sys/fs/cgroup")
	if err != nil {
		return err
	}
	fmt.Println("io.max", line)
	f, err := os.OpenFile("/dev/"+l.Disk, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// O_DIRECT wants an aligned buffer: an anonymous mapping is one.
	buf, err := syscall.Mmap(-1, 0, 1<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return err
	}
	t0 := time.Now()
	for i := int64(0); i < 128; i++ {
		if _, err := f.ReadAt(buf, i<<20); err != nil {
			return fmt.Errorf("1 MiB read %d: %w", i, err)
		}
	}
	t1 := time.Now()
	for i := int64(0); i < 1500; i++ {
		// Every 4 KiB read its own request: 64 KiB apart, none merged.
		if _, err := f.ReadAt(buf[:4096], i<<16); err != nil {
			return fmt.Errorf("4 KiB read %d: %w", i, err)
		}
	}
	t2 := time.Now()
	// Bursts after pauses, as a boot reads: 10 rounds of a 200 ms pause
	// and 2 MiB in 128 KiB requests. blk-throttle's first window after a
	// pause passes a window's worth unthrottled; only the reads are timed.
	var burst time.Duration
	for r := int64(0); r < 10; r++ {
		time.Sleep(200 * time.Millisecond)
		b0 := time.Now()
		for i := int64(0); i < 16; i++ {
			if _, err := f.ReadAt(buf[:128<<10], r<<21+i<<17); err != nil {
				return fmt.Errorf("burst %d, read %d: %w", r, i, err)
			}
		}
		burst += time.Since(b0)
	}
	fmt.Printf("READS %.6f %.6f %.6f\n", t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds(), burst.Seconds())
	return nil
}
