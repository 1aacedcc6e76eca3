package nvinit

import (
	"syscall"
	"time"
	"unsafe"

	"github.com/nvboot/nvboot/format/bootmark"
)

// The marker format itself lives in format/bootmark, shared with the host
// side (`nvboot measure`) so the two can never drift; nvinit adds the clock.
//
//	NVBOOT-MARK <name> [<arg>] <uptime_us>

// Mark is one parsed marker line.
type Mark = bootmark.Mark

// FormatMark returns the marker line (no newline) for a stage at uptime.
func FormatMark(name, arg string, uptime time.Duration) string {
	return bootmark.Format(bootmark.Mark{Name: name, Arg: arg, Uptime: uptime})
}

// ParseMark reads a marker from a console line; ok is false when it holds none.
func ParseMark(line string) (m Mark, ok bool) { return bootmark.Parse(line) }

const clockBoottime = 7 // CLOCK_BOOTTIME; syscall has no name for it

// Uptime is CLOCK_BOOTTIME: time since the kernel started, suspend included,
// the clock the host subtracts from the line's arrival to place the stage.
func Uptime() time.Duration {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockBoottime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// Mark prints a marker line for the stage name (with an optional argument,
// the service name) on the console, stamped with Uptime.
func (c *Console) Mark(name, arg string) {
	up := Uptime
	if c.Uptime != nil {
		up = c.Uptime
	}
	c.Line(FormatMark(name, arg, up()))
}
