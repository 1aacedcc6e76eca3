package nvinit

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// restart2 restarts the machine handing arg to the kernel's restart
// handlers (LINUX_REBOOT_CMD_RESTART2; x/sys's Reboot passes none): on a
// Pi the firmware driver sets the tryboot flag for "0 tryboot". It returns
// only on failure.
func restart2(arg string) error {
	p, err := unix.BytePtrFromString(arg)
	if err != nil {
		return err
	}
	_, _, e := unix.Syscall6(unix.SYS_REBOOT, unix.LINUX_REBOOT_MAGIC1, unix.LINUX_REBOOT_MAGIC2,
		unix.LINUX_REBOOT_CMD_RESTART2, uintptr(unsafe.Pointer(p)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
