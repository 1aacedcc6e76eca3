package config

import (
	"time"

	"github.com/nvboot/nvboot/device/contract"
)

// MaxTestBootDeadline bounds TestBootDeadline: a board left an hour on a
// new image that does not come up is down, not on trial.
const MaxTestBootDeadline = time.Hour

// TestBootDeadlineOrDefault returns TestBootDeadline, or
// contract.DefaultTestBootDeadline when unset (validate has checked it).
func (c *Config) TestBootDeadlineOrDefault() time.Duration {
	if d, err := time.ParseDuration(c.TestBootDeadline); err == nil && d > 0 {
		return d.Round(time.Second)
	}
	return contract.DefaultTestBootDeadline
}

// validateSlots checks Slots and TestBootDeadline.
func (c *Config) validateSlots(bad func(string, ...any)) {
	switch c.Slots {
	case 0, 1, 2:
	default:
		bad("Slots %d: want 2 (A/B slots for nvboot update) or 0 (one root)", c.Slots)
	}
	if c.TestBootDeadline == "" {
		return
	}
	if c.Slots != 2 {
		bad("TestBootDeadline %q: only an image with Slots 2 has a test boot", c.TestBootDeadline)
	}
	if d, err := time.ParseDuration(c.TestBootDeadline); err != nil || d < time.Second || d > MaxTestBootDeadline {
		bad("TestBootDeadline %q: want a duration from 1s to %v, such as 2m", c.TestBootDeadline, MaxTestBootDeadline)
	}
}
