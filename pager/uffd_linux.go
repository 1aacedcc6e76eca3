package pager

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The userfaultfd ABI (include/uapi/linux/userfaultfd.h, Linux 6.1);
// golang.org/x/sys/unix has only the system call number.
const (
	uffdAPI = 0xAA

	// ioctl numbers: _IOWR/_IOR(0xAA, nr, struct) with the sizes of the
	// structs below (TestIoctlNumbers recomputes them).
	uffdioAPI          = 0xC018AA3F // _IOWR(0xAA, 0x3F, struct uffdio_api): 24 bytes
	uffdioRegister     = 0xC020AA00 // _IOWR(0xAA, 0x00, struct uffdio_register): 32
	uffdioWake         = 0x8010AA02 // _IOR(0xAA, 0x02, struct uffdio_range): 16
	uffdioCopy         = 0xC028AA03 // _IOWR(0xAA, 0x03, struct uffdio_copy): 40
	uffdioWriteProtect = 0xC018AA06 // _IOWR(0xAA, 0x06, struct uffdio_writeprotect): 24

	uffdRegisterModeMissing = 1 << 0
	uffdRegisterModeWP      = 1 << 1
	uffdCopyModeDontwake    = 1 << 0
	uffdCopyModeWP          = 1 << 1
	uffdWPModeWP            = 1 << 0

	uffdFeaturePagefaultFlagWP = 1 << 0

	uffdEventPagefault     = 0x12
	uffdPagefaultFlagWrite = 1 << 0
	uffdPagefaultFlagWP    = 1 << 1

	uffdUserModeOnly = 1 // userfaultfd(2) flag: only faults from user mode (Linux 5.11)

	msgSize = 32 // struct uffd_msg, packed
)

type uffdioAPIArg struct{ API, Features, Ioctls uint64 }
type uffdioRange struct{ Start, Len uint64 }
type uffdioRegisterArg struct {
	Range  uffdioRange
	Mode   uint64
	Ioctls uint64
}
type uffdioCopyArg struct {
	Dst, Src, Len, Mode uint64
	Copy                int64
}
type uffdioWriteProtectArg struct {
	Range uffdioRange
	Mode  uint64
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	if e != 0 {
		return e
	}
	return nil
}

// openUffd makes a userfaultfd and agrees on the API, asking for
// write-protect faults. It tries a descriptor for every fault first (root,
// or vm.unprivileged_userfaultfd=1), then one for user-mode faults only,
// which an unprivileged process may have since Linux 5.11. wp reports
// whether the kernel gives write-protect faults on anonymous memory.
func openUffd() (fd int, wp bool, err error) {
	r, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|unix.O_NONBLOCK, 0, 0)
	if e == unix.EPERM {
		r, _, e = unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|unix.O_NONBLOCK|uffdUserModeOnly, 0, 0)
	}
	if e != 0 {
		return -1, false, fmt.Errorf("userfaultfd: %w", e)
	}
	fd = int(r)
	api := uffdioAPIArg{API: uffdAPI, Features: uffdFeaturePagefaultFlagWP}
	if err := ioctl(fd, uffdioAPI, unsafe.Pointer(&api)); err != nil {
		// A kernel without WP on anonymous memory refuses the feature:
		// the fd cannot be asked twice, so open another without it.
		unix.Close(fd)
		r, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|unix.O_NONBLOCK, 0, 0)
		if e != 0 {
			return -1, false, fmt.Errorf("userfaultfd: %w", e)
		}
		fd = int(r)
		api = uffdioAPIArg{API: uffdAPI}
		if err := ioctl(fd, uffdioAPI, unsafe.Pointer(&api)); err != nil {
			unix.Close(fd)
			return -1, false, fmt.Errorf("UFFDIO_API: %w", err)
		}
		return fd, false, nil
	}
	return fd, api.Features&uffdFeaturePagefaultFlagWP != 0, nil
}

func register(fd int, addr, n uintptr, wp bool) error {
	mode := uint64(uffdRegisterModeMissing)
	if wp {
		mode |= uffdRegisterModeWP
	}
	a := uffdioRegisterArg{Range: uffdioRange{uint64(addr), uint64(n)}, Mode: mode}
	if err := ioctl(fd, uffdioRegister, unsafe.Pointer(&a)); err != nil {
		return fmt.Errorf("UFFDIO_REGISTER: %w", err)
	}
	return nil
}

// copyPages installs n bytes from src at dst (both page aligned), write
// protected when wp, and wakes the threads waiting there unless dontwake.
func copyPages(fd int, dst, src, n uintptr, wp, dontwake bool) error {
	var mode uint64
	if wp {
		mode |= uffdCopyModeWP
	}
	if dontwake {
		mode |= uffdCopyModeDontwake
	}
	a := uffdioCopyArg{Dst: uint64(dst), Src: uint64(src), Len: uint64(n), Mode: mode}
	if err := ioctl(fd, uffdioCopy, unsafe.Pointer(&a)); err != nil {
		if err == unix.EEXIST {
			return nil // already there: a racing fault's page
		}
		return fmt.Errorf("UFFDIO_COPY %#x+%d: %w", dst, n, err)
	}
	return nil
}

func wake(fd int, addr, n uintptr) error {
	r := uffdioRange{uint64(addr), uint64(n)}
	if err := ioctl(fd, uffdioWake, unsafe.Pointer(&r)); err != nil {
		return fmt.Errorf("UFFDIO_WAKE: %w", err)
	}
	return nil
}

// writeProtect sets (on) or clears write protection of a range; clearing
// wakes the writers waiting on it.
func writeProtect(fd int, addr, n uintptr, on bool) error {
	a := uffdioWriteProtectArg{Range: uffdioRange{uint64(addr), uint64(n)}}
	if on {
		a.Mode = uffdWPModeWP // the kernel refuses DONTWAKE with WP
	}
	if err := ioctl(fd, uffdioWriteProtect, unsafe.Pointer(&a)); err != nil {
		return fmt.Errorf("UFFDIO_WRITEPROTECT %#x+%d: %w", addr, n, err)
	}
	return nil
}
