package bootmark

import "time"

// Stamped is a mark with the host time its line arrived, since power-on.
type Stamped struct {
	At   time.Duration
	Mark Mark
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
