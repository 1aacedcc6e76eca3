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
	uffdFeatureWPUnpopulated   = 1 << 13 // Linux 6.4: reported, not used (openUffd)

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

// openUffd makes a userfaultfd and agrees on the API. An fd takes one
// UFFDIO_API, and a kernel refuses a feature it lacks, so a first fd asks
// for none and is closed: the kernel answers with every feature it has
// (avail). The second asks for what the pager uses of them: write-protect
// faults on anonymous memory (Linux 5.7, with the arch's
// CONFIG_HAVE_ARCH_USERFAULTFD_WP). Nothing newer is needed: the pager
// protects only pages it installed, so it does without
// UFFD_FEATURE_WP_UNPOPULATED (6.4), whose absence makes protecting a
// never-populated page a no-op. Each fd is first tried for every fault
// (root, or vm.unprivileged_userfaultfd=1), then for user-mode faults only,
// which an unprivileged process may have since Linux 5.11.
func openUffd() (fd int, wp bool, avail uint64, err error) {
	flags := uintptr(unix.O_CLOEXEC | unix.O_NONBLOCK)
	open := func(features uint64) (int, uint64, error) {
		r, _, e := unix.Syscall(unix.SYS_USERFAULTFD, flags, 0, 0)
		if e == unix.EPERM && flags&uffdUserModeOnly == 0 {
			flags |= uffdUserModeOnly
			r, _, e = unix.Syscall(unix.SYS_USERFAULTFD, flags, 0, 0)
		}
		if e != 0 {
			return -1, 0, fmt.Errorf("userfaultfd: %w", e)
		}
		api := uffdioAPIArg{API: uffdAPI, Features: features}
		if err := ioctl(int(r), uffdioAPI, unsafe.Pointer(&api)); err != nil {
			unix.Close(int(r))
			return -1, 0, fmt.Errorf("UFFDIO_API (features %#x): %w", features, err)
		}
		return int(r), api.Features, nil
	}
	probe, avail, err := open(0)
	if err != nil {
		return -1, false, 0, err
	}
	unix.Close(probe)
	want := avail & uffdFeaturePagefaultFlagWP
	if fd, _, err = open(want); err != nil {
		return -1, false, 0, err
	}
	return fd, want != 0, avail, nil
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
// UFFDIO_COPY stops at a page that is there already: EEXIST when it is
// the first, else EAGAIN with the bytes it copied. Either way the rest
// must still go in, or the pager would count pages resident that are not
// and answer their faults with wakes for ever; a page found there is
// skipped (the pager's state says absent only for pages it dropped, so
// this is a guard, not a path).
func copyPages(fd int, dst, src, n uintptr, wp, dontwake bool) error {
	var mode uint64
	if wp {
		mode |= uffdCopyModeWP
	}
	if dontwake {
		mode |= uffdCopyModeDontwake
	}
	skipped := false
	for off := uintptr(0); off < n; {
		a := uffdioCopyArg{Dst: uint64(dst + off), Src: uint64(src + off), Len: uint64(n - off), Mode: mode}
		err := ioctl(fd, uffdioCopy, unsafe.Pointer(&a))
		switch {
		case err == nil:
			off = n
		case err == unix.EAGAIN && a.Copy > 0:
			off += uintptr(a.Copy)
		case err == unix.EEXIST:
			off += uintptr(pageSize)
			skipped = true
		default:
			return fmt.Errorf("UFFDIO_COPY %#x+%d: %w", dst+off, n-off, err)
		}
	}
	if skipped && !dontwake {
		return wake(fd, dst, n) // a waiter on a skipped page
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
