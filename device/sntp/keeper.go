package sntp

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/contract"
)

// Defaults of a Keeper.
const (
	DefaultInterval = time.Hour
	DefaultTimeout  = 3 * time.Second
	// StepLimit is the largest offset slewed once the clock was set; a
	// larger one is stepped (ntpd's step threshold).
	StepLimit  = 128 * time.Millisecond
	firstRetry = time.Second
	maxRetry   = 64 * time.Second
)

// Keeper keeps the system clock on its servers' time.
type Keeper struct {
	Servers  []string      // HOST or HOST:PORT (contract.NTPAddress)
	Interval time.Duration // between queries once set; 0: DefaultInterval
	Timeout  time.Duration // for one answer; 0: DefaultTimeout
	Logf     func(format string, args ...any)
	// Step sets the clock to t; nil: clock_settime (settimeofday).
	Step func(t time.Time) error
	// Slew adjusts the clock gradually by d; nil: adjtimex's single-shot
	// offset.
	Slew func(d time.Duration) error
	// Set is called after each step or slew with the answer it used (nil:
	// nothing), on Run's goroutine.
	Set func(a Answer, stepped bool)
	// Retry is the wait before the second round of queries when the first
	// got no good answer, doubling up to 64 s; 0: a second.
	Retry time.Duration

	failed map[string]bool // servers failing since their last good answer
}

// Run asks until ctx ends: every server in turn until one answers well,
// the clock stepped on that first answer, then a query every Interval.
func (k *Keeper) Run(ctx context.Context) {
	wait, set := k.Retry, false
	if wait == 0 {
		wait = firstRetry
	}
	for {
		if a, ok := k.round(ctx); ok {
			stepped := !set || a.Offset > StepLimit || a.Offset < -StepLimit
			if err := k.apply(a, stepped); err != nil {
				k.logf("clock: %v", err)
			} else {
				set = true
				if k.Set != nil {
					k.Set(a, stepped)
				}
			}
		}
		next := k.Interval
		if next == 0 {
			next = DefaultInterval
		}
		if !set {
			next, wait = wait, min(2*wait, maxRetry)
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// round asks each server once, in turn, until one answers well.
func (k *Keeper) round(ctx context.Context) (Answer, bool) {
	timeout := k.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	for _, s := range k.Servers {
		qctx, cancel := context.WithTimeout(ctx, timeout)
		a, err := Query(qctx, contract.NTPAddress(s))
		cancel()
		if ctx.Err() != nil {
			return Answer{}, false
		}
		if err != nil {
			// Said once until it answers well: a server that is down
			// would otherwise fill the console every retry (and each
			// error names a new local port).
			if k.failed == nil {
				k.failed = map[string]bool{}
			}
			if !k.failed[s] {
				k.failed[s] = true
				k.logf("clock: %v; asking again, quietly, until it answers", err)
			}
			continue
		}
		delete(k.failed, s)
		return a, true
	}
	return Answer{}, false
}

// apply steps or slews the clock by a's offset and says so.
func (k *Keeper) apply(a Answer, step bool) error {
	if !step {
		slew := k.Slew
		if slew == nil {
			slew = slewClock
		}
		if err := slew(a.Offset); err != nil {
			return fmt.Errorf("slewing by %v from %s: %w", a.Offset, a.Server, err)
		}
		return nil
	}
	st := k.Step
	if st == nil {
		st = stepClock
	}
	// The offset applies now, not when the answer arrived.
	to := time.Now().Add(a.Offset)
	if err := st(to); err != nil {
		return fmt.Errorf("stepping to %s from %s: %w", to.UTC().Format(time.RFC3339), a.Server, err)
	}
	from := a.Server
	if a.Addr != a.Server {
		from += " (" + a.Addr + ")"
	}
	k.logf("clock: stepped by %v to %s from %s, stratum %d, delay %v", a.Offset.Round(time.Millisecond),
		to.UTC().Format(time.RFC3339), from, a.Stratum, a.Delay.Round(time.Microsecond))
	return nil
}

func (k *Keeper) logf(format string, args ...any) {
	if k.Logf != nil {
		k.Logf(format, args...)
	}
}

// StepClock sets the system clock to t (settimeofday: CLOCK_REALTIME).
func StepClock(t time.Time) error { return stepClock(t) }

func stepClock(t time.Time) error {
	tv := syscall.NsecToTimeval(t.UnixNano())
	return syscall.Settimeofday(&tv)
}

// adjOffsetSingleshot is ADJ_OFFSET_SINGLESHOT: adjtime(3)'s slew.
const adjOffsetSingleshot = 0x8001

// slewClock has the kernel slew the clock by d (in microseconds, at
// 500 ppm: a 128 ms offset takes about 4 minutes).
func slewClock(d time.Duration) error {
	tx := syscall.Timex{Modes: adjOffsetSingleshot, Offset: int64(d / time.Microsecond)}
	_, err := syscall.Adjtimex(&tx)
	return err
}
