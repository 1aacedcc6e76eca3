package bootmark

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Prefix starts every marker line.
const Prefix = "NVBOOT-MARK "

// Well-known marker names, in boot order.
const (
	Init         = "init"          // PID 1 started
	Mounts       = "mounts"        // /proc, /sys, /dev, /run mounted
	Store        = "store"         // text store mounted (or the fallback chosen)
	ServiceStart = "service-start" // arg: service name
	ServiceReady = "service-ready" // arg: service name
	Shutdown     = "shutdown"
	// TSC carries the time-stamp counter as its argument, read with the
	// uptime: under QEMU's -icount the TSC counts nanoseconds of guest time
	// since power-on (reset), firmware and kernel loading included.
	TSC = "tsc"
	// Handover is when the kernel ran init, on the kernel log's clock.
	Handover = "kernel-handover"
	// KmsgTSC carries the TSC written into a kernel log record, stamped
	// with that record's time (the kernel log's clock).
	KmsgTSC = "kmsg-tsc"
	// Answered carries the port whose service first answered an HTTP
	// request from inside the guest (nvinit asks when the kernel command
	// line has nvboot.answer=PORT).
	Answered = "answered"
	// DiskLimit carries the disk nvinit limited inside the guest with the
	// storage model (nvboot.disklimit): a device-clock boot that asked for
	// it and lacks the mark measured without it.
	DiskLimit = "disk-limit"
	// Step carries the name of a point inside one of nvinit's stages
	// (the store mounted, the network up...), timed in memory during the
	// boot and printed afterwards on a profiled boot (nvboot.profile), so
	// the profile costs the boot no console line.
	Step = "step"
	// ProfileEnd follows the last line of a profiled boot's dump: its
	// steps and its kernel log.
	ProfileEnd = "profile-end"
)

// Mark is one parsed marker.
type Mark struct {
	Name   string
	Arg    string        // e.g. the service name; may be empty
	Uptime time.Duration // since the kernel started
}

// Format returns the marker line for m (without a newline).
func Format(m Mark) string {
	s := Prefix + m.Name
	if m.Arg != "" {
		s += " " + m.Arg
	}
	return s + " " + strconv.FormatInt(m.Uptime.Microseconds(), 10)
}

// Parse reads a marker from a console line. The marker may start anywhere in
// the line (the kernel can print onto the same line); ok is false when the line
// holds none or a malformed one.
func Parse(line string) (m Mark, ok bool) {
	i := strings.Index(line, Prefix)
	if i < 0 {
		return Mark{}, false
	}
	f := strings.Fields(line[i+len(Prefix):])
	if len(f) < 2 || len(f) > 3 || !IsWord(f[0]) {
		return Mark{}, false
	}
	us, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil || us < 0 || us > int64(1<<62)/1000 {
		return Mark{}, false
	}
	m = Mark{Name: f[0], Uptime: time.Duration(us) * time.Microsecond}
	if len(f) == 3 {
		if !IsWord(f[1]) {
			return Mark{}, false
		}
		m.Arg = f[1]
	}
	return m, true
}

// IsWord reports whether s can be a marker name or argument (a service name
// must be one, since it appears in markers): 1 to 64 of letters, digits, '-',
// '_' and '.'.
func IsWord(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// Key names a mark in a report: "name" or "name:arg".
func (m Mark) Key() string {
	if m.Arg == "" {
		return m.Name
	}
	return fmt.Sprintf("%s:%s", m.Name, m.Arg)
}
