package bootmark

import (
	"errors"
	"strconv"
	"time"
)

// Stamped is a mark with the host time its line arrived, since power-on.
type Stamped struct {
	At   time.Duration
	Mark Mark
}

// Unstamped returns the marks of ss alone, in order: what PlaceGuest
// takes, the guest's clock needing no arrival times.
func Unstamped(ss []Stamped) []Mark {
	ms := make([]Mark, len(ss))
	for i, s := range ss {
		ms[i] = s.Mark
	}
	return ms
}

// Timeline places a boot's marks on the host's clock.
type Timeline struct {
	// KernelStart is when the guest kernel's clock started, since power-on:
	// firmware and kernel loading before it.
	KernelStart time.Duration
	// Stages maps Mark.Key() to its time since power-on (the first of each).
	Stages map[string]time.Duration
}

// Place builds the timeline. A line reaches the host after the guest stamped
// it, so each mark bounds the kernel's start from above (arrival minus
// uptime); the smallest bound is the best estimate. Stage times are then
// KernelStart + uptime: guest-clock accurate, free of console latency.
func Place(marks []Stamped) Timeline {
	tl := Timeline{Stages: map[string]time.Duration{}}
	for i, s := range marks {
		if b := s.At - s.Mark.Uptime; i == 0 || b < tl.KernelStart {
			tl.KernelStart = b
		}
	}
	if tl.KernelStart < 0 {
		tl.KernelStart = 0 // clocks disagree by less than the resolution
	}
	for _, s := range marks {
		if _, seen := tl.Stages[s.Mark.Key()]; !seen {
			tl.Stages[s.Mark.Key()] = tl.KernelStart + s.Mark.Uptime
		}
	}
	return tl
}

// PlaceGuest builds the timeline from the guest's own clock alone, for a
// guest whose TSC counts nanoseconds since power-on (QEMU's -icount: the
// TSC is its virtual clock). Nothing depends on when lines reached the
// host. Marks are stamped with one of two guest clocks, each tied to the
// TSC by one mark read together with it: the kernel log's clock (the
// handover mark) by kmsg-tsc, CLOCK_BOOTTIME (every other mark) by tsc.
//
// Neither clock's zero is the kernel's start: under -icount both run ahead
// of the TSC early in the boot (by about 80 ms at 1 GIPS; they agree with
// it from the switch to the TSC clocksource on). So KernelStart is left 0
// here: the caller measures it (vm.KernelEntry).
func PlaceGuest(marks []Mark) (Timeline, error) {
	var boot, log time.Duration
	var haveBoot, haveLog bool
	for _, m := range marks {
		var off *time.Duration
		var have *bool
		switch m.Name {
		case TSC:
			off, have = &boot, &haveBoot
		case KmsgTSC:
			off, have = &log, &haveLog
		default:
			continue
		}
		if *have {
			continue
		}
		ticks, err := strconv.ParseInt(m.Arg, 10, 64)
		if err != nil || ticks < 0 {
			return Timeline{}, errors.New("bootmark: " + m.Name + " mark with a bad counter " + strconv.Quote(m.Arg))
		}
		*off, *have = time.Duration(ticks)-m.Uptime, true
	}
	if !haveBoot || !haveLog {
		return Timeline{}, errors.New("bootmark: no tsc or kmsg-tsc mark: the guest clock cannot be tied to power-on (an nvinit without them, or a CPU without a TSC?)")
	}
	tl := Timeline{Stages: map[string]time.Duration{}}
	for _, m := range marks {
		if _, seen := tl.Stages[m.Key()]; seen {
			continue
		}
		if m.Name == Handover || m.Name == KmsgTSC {
			tl.Stages[m.Key()] = max(log+m.Uptime, 0)
		} else {
			tl.Stages[m.Key()] = max(boot+m.Uptime, 0)
		}
	}
	return tl, nil
}
