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
	"unsafe"

	"golang.org/x/sys/unix"

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

// Backlog is what the storage model owes for what the disk served before
// ApplyDiskLimit: under the device clock the disk is read from pmem and
// nothing paced those reads. Reads and writes are limited apart, as io.max
// limits them, so they overlap; here there are only reads.
func Backlog(l contract.DiskLimit, r Served) time.Duration {
	var d time.Duration
	if l.ReadIOPS > 0 {
		d = time.Duration(r.Requests) * time.Second / time.Duration(l.ReadIOPS)
	}
	if l.ReadBPS > 0 {
		d = max(d, time.Duration(r.Bytes)*time.Second/time.Duration(l.ReadBPS))
	}
	return d
}

// Served is what a disk has read: bytes, in how many requests.
type Served struct{ Bytes, Requests int64 }

// readahead is the most one read request brings in: the kernel's default
// read_ahead_kb (128 KiB), in pages.
const readahead = 32

// residentRuns counts the pages a mincore vector marks resident, and the
// read requests that brought them in: each run of resident pages, cut into
// readahead-sized requests.
func residentRuns(vec []byte) Served {
	var s Served
	run := 0
	flush := func() {
		if run > 0 {
			s.Requests += int64((run + readahead - 1) / readahead)
		}
		run = 0
	}
	for _, v := range vec {
		if v&1 == 0 {
			flush()
			continue
		}
		s.Bytes += pageSize
		run++
	}
	flush()
	return s
}

const pageSize = 4096

// fileMappings lists the files of a /proc/PID/maps text that live on the
// device numbered major:minor, once each.
func fileMappings(maps string, major, minor uint32) []string {
	want := fmt.Sprintf("%02x:%02x", major, minor)
	seen := map[string]bool{}
	var files []string
	for _, line := range strings.Split(maps, "\n") {
		f := strings.Fields(line)
		// address perms offset dev inode path
		if len(f) < 6 || f[3] != want || f[4] == "0" || !strings.HasPrefix(f[5], "/") || seen[f[5]] {
			continue
		}
		seen[f[5]] = true
		files = append(files, f[5])
	}
	return files
}

// ServedBefore is what the root's disk had read by now, as far as this
// process can see: the resident pages of its own files on the root (PID 1's
// binary, its loader), which is what a boot reads before PID 1 runs but for
// the filesystem's metadata (a few KiB). pmem keeps no I/O statistics
// unless asked after the fact (queue/iostats), so the page cache is the
// record.
func ServedBefore() (Served, error) {
	var root unix.Stat_t
	if err := unix.Stat("/", &root); err != nil {
		return Served{}, err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return Served{}, err
	}
	var total Served
	for _, path := range fileMappings(string(maps), unix.Major(root.Dev), unix.Minor(root.Dev)) {
		s, err := residentFile(path)
		if err != nil {
			return total, fmt.Errorf("%s: %w", path, err)
		}
		total.Bytes += s.Bytes
		total.Requests += s.Requests
	}
	return total, nil
}

// residentFile maps path and asks mincore which of its pages are in the
// page cache; mapping it brings nothing in.
func residentFile(path string) (Served, error) {
	f, err := os.Open(path)
	if err != nil {
		return Served{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return Served{}, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return Served{}, err
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+pageSize-1)/pageSize)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return Served{}, fmt.Errorf("mincore: %w", e)
	}
	return residentRuns(vec), nil
}
