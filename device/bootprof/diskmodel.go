package bootprof

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/contract"
)

// diskModelCgroup is the cgroup whose io.max holds a DiskLimit (io.max
// cannot be set on the root cgroup). nvinit moves itself into its child
// diskModelInit, so everything it starts inherits the limit, and
// diskModelCgroup itself holds no process: cgroup v2 lets only such a
// cgroup enable controllers for its children, so a poold pool placed under
// it (Cgroup "/sys/fs/cgroup/disk-model/NAME") can still have its memory
// controller, and shares the limit.
const (
	diskModelCgroup = "disk-model"
	diskModelInit   = "init"
)

// MountFunc is mount(2): syscall.Mount, or a fake in tests.
type MountFunc func(source, target, fstype string, flags uintptr, data string) error

// ApplyDiskLimit limits l.Disk for this process and every process it starts
// from now on: it enables the io controller in the cgroup2 hierarchy at
// cgroupRoot (mounting it there with mount unless mounted), writes l to
// the io.max of diskModelCgroup, shortens the disk's throttle window to
// contract.DiskLimitSlice and moves the calling process into
// diskModelCgroup/diskModelInit. sys is the sysfs root, to find the disk.
// It returns the io.max line written.
func ApplyDiskLimit(l contract.DiskLimit, mount MountFunc, sys, cgroupRoot string) (string, error) {
	fail := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("disk limit on %s: "+format, append([]any{l.Disk}, args...)...)
	}
	dev, err := os.ReadFile(filepath.Join(sys, "block", l.Disk, "dev"))
	if err != nil {
		return fail("%w", err)
	}
	if err := mount("cgroup2", cgroupRoot, "cgroup2", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil && !errors.Is(err, syscall.EBUSY) {
		return fail("mounting cgroup2 on %s: %w", cgroupRoot, err)
	}
	if err := os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), []byte("+io"), 0); err != nil {
		return fail("enabling the io controller in %s (a kernel without CONFIG_BLK_CGROUP?): %w", cgroupRoot, err)
	}
	cg := filepath.Join(cgroupRoot, diskModelCgroup)
	leaf := filepath.Join(cg, diskModelInit)
	for _, d := range []string{cg, leaf} {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fail("%w", err)
		}
	}
	line := l.IOMax(strings.TrimSpace(string(dev)))
	if err := os.WriteFile(filepath.Join(cg, "io.max"), []byte(line), 0); err != nil {
		return fail("io.max %q (a kernel without CONFIG_BLK_DEV_THROTTLING?): %w", line, err)
	}
	slice := filepath.Join(sys, "block", l.Disk, "queue", "throttle_sample_time")
	if err := os.WriteFile(slice, []byte(strconv.Itoa(contract.DiskLimitSlice)), 0); err != nil {
		return fail("a %d ms throttle window, else a pause lets 100 ms of reads through unthrottled (a kernel without CONFIG_BLK_DEV_THROTTLING_LOW?): %w", contract.DiskLimitSlice, err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fail("joining %s: %w", leaf, err)
	}
	return line, nil
}

// Backlog is what the storage model owes for the I/O the disk served
// before ApplyDiskLimit: the kernel's mount of the root and nvinit's own
// pages. Under the device clock nothing else paces those reads (the disk
// is memory to QEMU, and QEMU's throttle would wait on the host's clock),
// so nvinit waits this long once the limit is in place: the boot then
// pays the model for every byte it read, a little later than a card would
// have charged it. stat is /sys/block/DISK/stat; reads and writes are
// limited apart, as io.max limits them, so they overlap.
func Backlog(l contract.DiskLimit, stat string) (time.Duration, error) {
	f := strings.Fields(stat)
	if len(f) < 7 {
		return 0, fmt.Errorf("disk stat %q: want at least 7 fields", stat)
	}
	n := make([]int64, 7)
	for i := range n {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("disk stat %q: field %d is not a count", stat, i+1)
		}
		n[i] = v
	}
	// Fields: reads completed, merged, sectors read, ms; writes completed,
	// merged, sectors written (Documentation/block/stat.rst).
	cost := func(ios, sectors, iops, bps int64) time.Duration {
		var d time.Duration
		if iops > 0 {
			d = time.Duration(ios) * time.Second / time.Duration(iops)
		}
		if bps > 0 {
			d = max(d, time.Duration(sectors*512)*time.Second/time.Duration(bps))
		}
		return d
	}
	return max(cost(n[0], n[2], l.ReadIOPS, l.ReadBPS), cost(n[4], n[6], l.WriteIOPS, l.WriteBPS)), nil
}
