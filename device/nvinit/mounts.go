package nvinit

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// mounter is mount(2) and umount2(2); tests pass a fake.
type mounter interface {
	Mount(source, target, fstype string, flags uintptr, data string) error
	Unmount(target string, flags int) error
}

// sysMounter calls the kernel.
type sysMounter struct{}

func (sysMounter) Mount(source, target, fstype string, flags uintptr, data string) error {
	return syscall.Mount(source, target, fstype, flags, data)
}

func (sysMounter) Unmount(target string, flags int) error { return syscall.Unmount(target, flags) }

// mountPoint is one filesystem nvinit mounts.
type mountPoint struct {
	Source, Target, FSType string
	Flags                  uintptr
	Data                   string
}

const (
	msNoSUID  = syscall.MS_NOSUID
	msNoDev   = syscall.MS_NODEV
	msNoExec  = syscall.MS_NOEXEC
	msRdonly  = syscall.MS_RDONLY
	msRemount = syscall.MS_REMOUNT
	mntDetach = syscall.MNT_DETACH
)

// kernelMounts are the filesystems every boot needs before anything else.
var kernelMounts = []mountPoint{
	{"proc", "/proc", "proc", msNoSUID | msNoDev | msNoExec, ""},
	{"sysfs", "/sys", "sysfs", msNoSUID | msNoDev | msNoExec, ""},
	{"devtmpfs", "/dev", "devtmpfs", msNoSUID, "mode=0755"},
	{"tmpfs", "/run", "tmpfs", msNoSUID | msNoDev, "mode=0755"},
	{"tmpfs", "/tmp", "tmpfs", msNoSUID | msNoDev, "mode=1777"},
	// Every boot has the same cgroup hierarchy: poold's pools and the
	// device clock's disk model (bootprof.ApplyDiskLimit) both live in it.
	{"cgroup2", "/sys/fs/cgroup", "cgroup2", msNoSUID | msNoDev | msNoExec, ""},
}

// mountAll mounts each point in order. One already mounted (EBUSY: the kernel
// or ld-off2f got there first) is fine; the other failures are joined, and
// the rest are still tried: a missing /tmp must not cost /sys.
func mountAll(m mounter, points []mountPoint) error {
	var errs []error
	for _, p := range points {
		if err := mountOne(m, p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func mountOne(m mounter, p mountPoint) error {
	// The root filesystem is read-only: the directory must be in the image;
	// MkdirAll is for writable roots (tests, an initramfs) and its EROFS on
	// an existing directory does not happen.
	if err := os.MkdirAll(p.Target, 0o755); err != nil {
		return fmt.Errorf("mounting %s: %w", p.Target, err)
	}
	err := m.Mount(p.Source, p.Target, p.FSType, p.Flags, p.Data)
	if err != nil && !errors.Is(err, syscall.EBUSY) {
		return fmt.Errorf("mounting %s on %s (%s): %w", p.Source, p.Target, p.FSType, err)
	}
	return nil
}

// isMountPoint reports whether dir is a mount point, from a mountinfo file
// (/proc/self/mountinfo): field 5 is the mount point, octal-escaped.
func isMountPoint(mountinfo, dir string) bool {
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		return false
	}
	for _, line := range splitLines(string(b)) {
		f := splitFields(line)
		if len(f) > 4 && unescapeMount(f[4]) == dir {
			return true
		}
	}
	return false
}
