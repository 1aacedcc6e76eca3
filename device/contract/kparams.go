package contract

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The kernel command-line parameters nvboot gives nvinit: every nvboot.*
// name, and its parser, is here, so the host that writes a command line
// and the device that reads it cannot drift. Each is read by param's one
// rule. The VM runner sets OffParam, DiskLimitParam and AnswerParam (and
// ProfileParam for a profile); an
// image's boot entries set KernelFromParam and SlotParam (a Pi's
// cmdline.txt too: the firmware tells the kernel nothing of its slot). A board's own
// command line has none of them.
const (
	// OffParam=reset ends the machine with a reset instead of a power-off:
	// a QEMU board booted without ACPI cannot power off, and QEMU started
	// with -no-reboot ends on the reset.
	OffParam = "nvboot.off"
	// DiskLimitParam=DISK,rbps=N,riops=N,wbps=N,wiops=N[,backlog=1] limits the disk
	// from inside the guest (see DiskLimit).
	DiskLimitParam = "nvboot.disklimit"
	// KernelFromParam=pmem|card says where the firmware took the kernel
	// from: the kernel region on pmem (its header valid and its hash the
	// one the boot entry names) or the card's bzImage. After a card boot
	// nvinit rewrites the region (KernelRegion), so the next boot copies
	// the kernel from pmem. A bootloader that knows of no region passes
	// nothing, and nvinit leaves the region alone.
	KernelFromParam = "nvboot.kernel"
	// AnswerParam=PORT asks nvinit to time the first HTTP answer of the
	// service on PORT from inside the guest. `nvboot measure` sets it
	// under the device clock, where a request timed by the host would
	// measure the emulator, not the device.
	AnswerParam = "nvboot.answer"
	// SlotParam=a|b names the A/B slot a unified kernel image boots: how
	// nvinit knows which slot runs.
	SlotParam = "nvboot.slot"
	// ProfileParam=1 asks nvinit to print what it timed inside its stages
	// and the kernel's log (initcall_debug's lines, kept off the quiet
	// console) once every service is ready and the first answer
	// (AnswerParam) is marked: `nvboot measure -profile` sets it.
	ProfileParam = "nvboot.profile"
)

// How often nvinit checks a service's WaitFor, and asks for its first
// answer when AnswerParam names its port: why a measurement can mark a
// service ready after its first answer.
const (
	ReadinessPoll = 5 * time.Millisecond
	AnswerPoll    = time.Millisecond
)

// param returns the value of the last name=value on the command line (the
// kernel's rule: a later one wins); ok is false when there is none. Only a
// whole word counts: xname=1 and name.x=1 are not name.
func param(cmdline, name string) (string, bool) {
	v, ok := "", false
	for _, f := range strings.Fields(cmdline) {
		if s, found := strings.CutPrefix(f, name+"="); found {
			v, ok = s, true
		}
	}
	return v, ok
}

// Where the firmware took the kernel from (KernelFromParam).
const (
	KernelFromPmem = "pmem"
	KernelFromCard = "card"
)

// KernelFrom returns KernelFromParam's value: "" when absent; a value
// other than pmem or card is an error naming it.
func KernelFrom(cmdline string) (string, error) {
	v, ok := param(cmdline, KernelFromParam)
	if !ok || v == KernelFromPmem || v == KernelFromCard {
		return v, nil
	}
	return "", fmt.Errorf("%s=%q: want %s or %s", KernelFromParam, v, KernelFromPmem, KernelFromCard)
}

// OffByReset reports whether the command line asks for nvboot.off=reset;
// a value other than reset or poweroff is an error naming it.
func OffByReset(cmdline string) (bool, error) {
	v, ok := param(cmdline, OffParam)
	switch {
	case !ok || v == "poweroff":
		return false, nil
	case v == "reset":
		return true, nil
	}
	return false, fmt.Errorf("%s=%q: want reset or poweroff", OffParam, v)
}

// Profiled reports whether the command line asks for ProfileParam=1; a
// value other than 0 or 1 is an error naming it.
func Profiled(cmdline string) (bool, error) {
	v, ok := param(cmdline, ProfileParam)
	switch {
	case !ok || v == "0":
		return false, nil
	case v == "1":
		return true, nil
	}
	return false, fmt.Errorf("%s=%q: want 1 or 0", ProfileParam, v)
}

// AnswerPort returns the port AnswerParam names, 0 when there is none; a
// value that is not a TCP port is an error naming it.
func AnswerPort(cmdline string) (int, error) {
	v, ok := param(cmdline, AnswerParam)
	if !ok {
		return 0, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("%s=%q: want a TCP port, 1 to 65535", AnswerParam, v)
	}
	return p, nil
}

// ParseSlot reads SlotParam: "a" or "b"; ok is false when it is not there
// (an image without slots).
func ParseSlot(cmdline string) (slot string, ok bool, err error) {
	v, ok := param(cmdline, SlotParam)
	if !ok {
		return "", false, nil
	}
	if v != "a" && v != "b" {
		return "", false, fmt.Errorf("%s=%q: want a or b", SlotParam, v)
	}
	return v, true, nil
}

// DiskLimit is a storage speed model applied inside the guest, with the io
// controller's io.max (the kernel's blk-throttle). Its waits pass on the
// guest's own clock: under QEMU's instruction counter a request the guest
// waits for while it computes costs what the model says, where QEMU's
// throttle, which waits on the host's clock, charged only the instructions
// that ran meanwhile (docs/DEVICE-CLOCK.md). nvinit applies it.
type DiskLimit struct {
	Disk                string // block device name in /sys/block, e.g. vda
	ReadBPS, ReadIOPS   int64  // 0: unlimited
	WriteBPS, WriteIOPS int64
	// Backlog (backlog=1) says nothing paced the disk before nvinit
	// applied the limit (a disk on pmem under the device clock): nvinit
	// then charges what it had served already (bootprof.Backlog).
	Backlog bool
}

// ParseDiskLimit reads DiskLimitParam from a kernel command line; ok is
// false when it is absent. A malformed value is an error naming it.
func ParseDiskLimit(cmdline string) (l DiskLimit, ok bool, err error) {
	v, ok := param(cmdline, DiskLimitParam)
	if !ok {
		return DiskLimit{}, false, nil
	}
	bad := func(why string) (DiskLimit, bool, error) {
		return DiskLimit{}, false, fmt.Errorf("%s=%q: %s (want DISK,rbps=N,riops=N,wbps=N,wiops=N[,backlog=1])", DiskLimitParam, v, why)
	}
	parts := strings.Split(v, ",")
	l.Disk = parts[0]
	if l.Disk == "" || strings.ContainsAny(l.Disk, "/.") {
		return bad(fmt.Sprintf("disk %q is not a block device name", l.Disk))
	}
	for _, kv := range parts[1:] {
		k, s, found := strings.Cut(kv, "=")
		n, perr := strconv.ParseInt(s, 10, 64)
		if !found || perr != nil || n < 0 {
			return bad(fmt.Sprintf("%q is not KEY=N with N ≥ 0", kv))
		}
		switch k {
		case "rbps":
			l.ReadBPS = n
		case "riops":
			l.ReadIOPS = n
		case "wbps":
			l.WriteBPS = n
		case "wiops":
			l.WriteIOPS = n
		case "backlog":
			if n > 1 {
				return bad(fmt.Sprintf("%q: backlog is 0 or 1", kv))
			}
			l.Backlog = n == 1
		default:
			return bad(fmt.Sprintf("unknown limit %q", k))
		}
	}
	return l, true, nil
}

// DiskLimitSlice is the window blk-throttle computes its budget over, in
// ms, which nvinit writes to the disk's queue/throttle_sample_time. The
// kernel's default is 100 ms, and the first window after a pause lets a
// whole window's worth through without waiting: 4 MiB or 150 requests on
// the sd model, after every pause, and a boot's reads come in bursts. At
// 12 ms (3 jiffies at HZ=250) that burst is 480 KiB or 18 requests; a
// shorter window charges too much, as the kernel rounds each wait up to
// whole jiffies (TestDiskLimitUnderDeviceClock has the figures).
const DiskLimitSlice = 12

// String is the nvboot.disklimit parameter for l.
func (l DiskLimit) String() string {
	s := fmt.Sprintf("%s=%s,rbps=%d,riops=%d,wbps=%d,wiops=%d", DiskLimitParam, l.Disk, l.ReadBPS, l.ReadIOPS, l.WriteBPS, l.WriteIOPS)
	if l.Backlog {
		s += ",backlog=1"
	}
	return s
}

// IOMax is l as an io.max line for the disk numbered dev ("MAJ:MIN").
func (l DiskLimit) IOMax(dev string) string {
	f := func(n int64) string {
		if n == 0 {
			return "max"
		}
		return strconv.FormatInt(n, 10)
	}
	return fmt.Sprintf("%s rbps=%s wbps=%s riops=%s wiops=%s", dev, f(l.ReadBPS), f(l.WriteBPS), f(l.ReadIOPS), f(l.WriteIOPS))
}
