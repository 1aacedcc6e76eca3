package nvinit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/sntp"
	"github.com/nvboot/nvboot/internal/atomicfile"
)

// wallClock keeps the system clock from going backwards across boots on a
// board without a real-time clock, and sets it from SNTP (device/sntp)
// when the config names servers. What it touches is injected, so a host
// test runs it on temporary files.
type wallClock struct {
	Floor time.Time // the image's (contract.Clock.Floor); zero: none
	// Saved is the file the time is saved in (contract.ClockSavedPath
	// under the state's directory); "": the state is not mounted.
	Saved string
	// SetMark is written once SNTP set the clock (contract.ClockSetPath).
	SetMark string
	Now     func() time.Time        // nil: time.Now
	Step    func(t time.Time) error // nil: settimeofday
	Logf    func(format string, args ...any)

	mu sync.Mutex // one save at a time
}

func (c *wallClock) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Restore sets the clock forward to the latest of the floor and the saved
// time when it reads before them, and says so; a clock already past them
// is left alone (it is never set backwards here).
func (c *wallClock) Restore() {
	target, why := c.Floor, "the floor (contract.ClockEpoch)"
	if c.Saved != "" {
		saved, err := readSavedClock(c.Saved)
		switch {
		case err != nil && !os.IsNotExist(err):
			c.Logf("clock: %v; not used", err)
		case err == nil && saved.After(target):
			target, why = saved, "the time saved on the state at "+c.Saved
		}
	}
	now := c.now()
	if target.IsZero() || !now.Before(target) {
		return
	}
	step := c.Step
	if step == nil {
		step = sntp.StepClock
	}
	if err := step(target); err != nil {
		c.Logf("clock: %s is before %s (%s); setting it: %v", stamp(now), why, stamp(target), err)
		return
	}
	c.Logf("clock: %s is before %s; set forward to %s", stamp(now), why, stamp(target))
}

// Save writes the time to Saved (whole or not at all), when there is one.
func (c *wallClock) Save() {
	if c.Saved == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(c.Saved), 0o755); err != nil {
		c.Logf("clock: saving the time: %v", err)
		return
	}
	if err := atomicfile.WriteFile(c.Saved, []byte(stamp(c.now())+"\n"), 0o644); err != nil {
		c.Logf("clock: saving the time: %v", err)
	}
}

// Run saves the time every contract.ClockSaveInterval and, with servers,
// runs the SNTP keeper, until ctx ends. It blocks nothing: nvinit runs it
// on a goroutine of its own.
func (c *wallClock) Run(ctx context.Context, servers []string) {
	var wg sync.WaitGroup
	if len(servers) > 0 {
		k := &sntp.Keeper{Servers: servers, Logf: c.Logf, Step: c.Step, Set: func(a sntp.Answer, stepped bool) {
			if !stepped {
				return
			}
			c.Save()
			if c.SetMark == "" {
				return
			}
			err := os.MkdirAll(filepath.Dir(c.SetMark), 0o755)
			if err == nil {
				err = atomicfile.WriteFile(c.SetMark, []byte(a.Server+"\n"), 0o644)
			}
			if err != nil {
				c.Logf("clock: %v; nvpull keeps waiting for the clock", err)
			}
		}}
		wg.Go(func() { k.Run(ctx) })
	}
	if c.Saved != "" {
		t := time.NewTicker(contract.ClockSaveInterval)
		defer t.Stop()
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case <-t.C:
				c.Save()
			}
		}
	}
	wg.Wait()
}

// readSavedClock reads a time Save wrote.
func readSavedClock(path string) (time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(b)))
	if err != nil {
		return time.Time{}, fmt.Errorf("saved time %s: %q is not an RFC 3339 time", path, strings.TrimSpace(string(b)))
	}
	return t, nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// restoreClock, as PID 1, sets the clock forward to the floor or
// the time saved on the state (once it is mounted), whichever is later,
// when it reads before them.
func (b *boot) restoreClock() {
	if !b.PID1 {
		return
	}
	b.clock = &wallClock{Floor: b.cfg.Clock.FloorTime(), SetMark: contract.ClockSetPath, Logf: b.Console.Logf}
	if b.stateOK {
		b.clock.Saved = filepath.Join(b.cfg.State.DirOrDefault(), strings.TrimPrefix(contract.ClockSavedPath, contract.StateDir))
	}
	b.clock.Restore()
	b.steps.Step("clock")
}

// keepClock, as PID 1, saves the time at an interval and runs the SNTP
// client with the config's NTP servers, on a goroutine of its own (the
// services start meanwhile); stop ends both and saves the time once more,
// for a clean shutdown.
func (b *boot) keepClock(ctx context.Context) (stop func()) {
	if b.clock == nil {
		return func() {}
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); b.clock.Run(cctx, b.cfg.Clock.NTP) }()
	return func() {
		cancel()
		<-done
		b.clock.Save()
	}
}
