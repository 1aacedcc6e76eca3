// Command arm64init is PID 1 of host/vm's arm64 boot tests
// (arm64_test.go). It prints the guest's clock at its start and its
// network and block devices, mounts the
// pmem region's fsdax namespace with dax=always, writes the marker the
// kernel command line names (nvtest.marker=) through a MAP_SYNC mapping,
// flushes it with package pmem, fsyncs, runs a pheap transaction there,
// and powers off. Every line it prints starts with ARM64INIT.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/internal/cpucounter"
	"github.com/nvboot/nvboot/pheap"
	"github.com/nvboot/nvboot/pmem"
)

// sinceOn is the guest's time since power-on, in nanoseconds.
func sinceOn() uint64 {
	return cpucounter.Read()
}

func main() {
	at := sinceOn() // first: the kernel's handover to init
	fmt.Printf("ARM64INIT init %d\n", at)
	if err := run(); err != nil {
		fmt.Println("ARM64INIT error", err)
	}
	fmt.Printf("ARM64INIT done %d\n", sinceOn())
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

func run() error {
	for _, m := range []struct{ dir, fs string }{{"/proc", "proc"}, {"/sys", "sysfs"}, {"/dev", "devtmpfs"}} {
		os.MkdirAll(m.dir, 0o755)
		if err := unix.Mount(m.fs, m.dir, m.fs, 0, ""); err != nil {
			return fmt.Errorf("mount %s: %w", m.dir, err)
		}
	}
	// The virtio-pci devices the board was given, as the kernel found them.
	for _, d := range []string{"/sys/class/net", "/sys/block"} {
		names, _ := os.ReadDir(d)
		var l []string
		for _, n := range names {
			l = append(l, n.Name())
		}
		fmt.Println("ARM64INIT", d, strings.Join(l, " "))
	}
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return err
	}
	var marker string
	for _, f := range strings.Fields(string(cmdline)) {
		if v, ok := strings.CutPrefix(f, "nvtest.marker="); ok {
			marker = v
		}
	}
	if marker == "" {
		return errors.New("no nvtest.marker= on the command line")
	}
	// libnvdimm registers its devices asynchronously: wait for the
	// namespace's block device.
	for i := 0; ; i++ {
		if _, err := os.Stat("/dev/pmem0"); err == nil {
			break
		} else if i == 1000 {
			return fmt.Errorf("no /dev/pmem0: %w", err)
		}
		time.Sleep(time.Millisecond)
	}
	os.MkdirAll("/mnt", 0o755)
	if err := unix.Mount("/dev/pmem0", "/mnt", "ext4", 0, "dax=always"); err != nil {
		return fmt.Errorf("mount /dev/pmem0 dax=always: %w", err)
	}
	mounts, _ := os.ReadFile("/proc/mounts")
	for _, l := range strings.Split(string(mounts), "\n") {
		if strings.Contains(l, " /mnt ") {
			fmt.Println("ARM64INIT mount", l)
		}
	}
	fmt.Println("ARM64INIT flush", pmem.Method())
	if err := writeMarker("/mnt/data", marker); err != nil {
		return err
	}
	h, err := pheap.Create("/mnt/state.heap", 1<<20)
	if err != nil {
		return err
	}
	fmt.Println("ARM64INIT heap", h.Mode())
	root, err := pheap.Root[struct{ N uint64 }](h, "n")
	if err != nil {
		return err
	}
	if err := h.Update(func(tx *pheap.Tx) error {
		r, err := root.Modify(tx)
		if err != nil {
			return err
		}
		r.N = 42
		return nil
	}); err != nil {
		return err
	}
	fmt.Println("ARM64INIT heap committed")
	return h.Close()
}

// writeMarker writes marker at the start of the file at path through a
// MAP_SYNC mapping (a synchronous DAX mapping: the pmem itself), makes it
// durable with the CPU's cache flush and a fence, then fsyncs.
func writeMarker(path, marker string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := unix.Mmap(int(f.Fd()), 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED_VALIDATE|unix.MAP_SYNC)
	if err != nil {
		return fmt.Errorf("mmap MAP_SYNC %s: %w", path, err)
	}
	fmt.Println("ARM64INIT map_sync accepted")
	copy(b, marker)
	pmem.Flush(b[:len(marker)])
	pmem.Fence()
	if !bytes.Equal(b[:len(marker)], []byte(marker)) {
		return errors.New("the mapping does not hold the marker")
	}
	if err := unix.Munmap(b); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	fmt.Println("ARM64INIT marker written")
	return nil
}
