package bootprof

import (
	"syscall"
	"time"
	"unsafe"

	"github.com/nvboot/nvboot/format/bootmark"
)

// Marker prints boot marks on the console, each a whole line in
// format/bootmark's format, shared with the host side (`nvboot measure`)
// so the two cannot drift; Marker adds the device's clock:
//
//	NVBOOT-MARK <name> [<arg>] <uptime_us>
type Marker struct {
	// Line writes one whole line on the console.
	Line func(s string)
	// Uptime stamps a mark; nil: CLOCK_BOOTTIME (uptime).
	Uptime func() time.Duration
}

// Mark prints the mark of stage name (with an optional argument, such as
// the service's name), stamped with the uptime.
func (m Marker) Mark(name, arg string) { m.at(name, arg, m.now()) }

// at prints the mark of stage name stamped with t.
func (m Marker) at(name, arg string, t time.Duration) {
	m.Line(bootmark.Format(bootmark.Mark{Name: name, Arg: arg, Uptime: t}))
}

func (m Marker) now() time.Duration {
	if m.Uptime != nil {
		return m.Uptime()
	}
	return uptime()
}

const clockBoottime = 7 // CLOCK_BOOTTIME; syscall has no name for it

// uptime is CLOCK_BOOTTIME: time since the kernel started, suspend
// included, the clock the host subtracts from the line's arrival to place
// the stage.
func uptime() time.Duration {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockBoottime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
