package nvbootcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/host/vm"
)

// drive powers the board on again after each reset (the update's reboot,
// a test boot's rollback) until cutAt, when it cuts the power; with cutAt
// zero, until the command r returns. It returns the last machine.
func (b *board) drive(m *vm.Machine, r *cmdRun, cutAt time.Time) *vm.Machine {
	b.t.Helper()
	var cut <-chan time.Time
	if !cutAt.IsZero() {
		tm := time.NewTimer(time.Until(cutAt))
		defer tm.Stop()
		cut = tm.C
	}
	done := r.done
	if cut != nil {
		done = nil // the cut comes whatever the command did
	}
	for {
		select {
		case <-m.Done():
			m = b.boot()
		case <-cut:
			b.cut(m)
			return m
		case <-done:
			return m
		}
	}
}

// committedBoot waits (up to 5 minutes, through resets) for the board to
// answer from a committed slot with kv ready, and returns what it runs.
func (b *board) committedBoot(m *vm.Machine) (*vm.Machine, *contract.Features) {
	b.t.Helper()
	_, up := b.urls()
	cl := &deploy.Client{URL: up, Password: "test"}
	end := time.Now().Add(5 * time.Minute)
	for time.Now().Before(end) {
		select {
		case <-m.Done(): // a test boot that rolls back resets
			m = b.boot()
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		f, err := cl.Features(ctx)
		cancel()
		if err == nil && f.Committed && strings.Contains(m.Console(), "NVBOOT-MARK service-ready kv") {
			return m, f
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.t.Fatalf("boot %d: no committed slot with kv ready within 5 minutes\n%s", b.boots, m.ConsoleTail(40))
	return nil, nil
}

// TestUpdatePowerCuts cuts the power of a UEFI board (OVMF, the watchdog,
// as TestUpdateOnUEFIBoard's) at random instants of nvboot update, while
// the host writes to kv all along. A first update, uncut, measures how long
// the whole command takes (and the downtime figures BENCHMARKS.md quotes);
// each cut (NVBOOT_UPDATE_CUTS, default 2; NVBOOT_UPDATE_SEED and
// NVBOOT_UPDATE_SPAN, as logged, replay the instants)
// falls at an instant drawn uniformly over that duration stretched by a
// quarter (a cut update may run slower than the measured one, and the end
// must be covered: a cut after the command returned falls after the
// commit) from the command's start, on a fresh board on the old image. After the cut the
// board is powered on until it answers from a committed slot: it must run
// the old image (slot a, kv "dev") or the new one (slot b, kv "2"), the
// slot, the image and kv's version agreeing; the new one whenever update
// had said "committed" before the cut, or nvinit had logged slot b's
// commit; and every write kv acknowledged before the cut must read back.
func TestUpdatePowerCuts(t *testing.T) {
	s := newSlotImages(t)
	cuts := cutCount("NVBOOT_UPDATE_CUTS", 2)
	rng, seed := cutRand(t, "NVBOOT_UPDATE_SEED")
	v1Dir, v1Im := s.v1Dir, s.v1Im
	v2, v2Dir, v2Im := s.v2, s.v2Dir, s.v2Im
	type runs struct{ slot, image, version string }
	old, newer := runs{"a", v1Im.ID, "dev"}, runs{"b", v2Im.ID, "2"}

	// The uncut update: its duration is the span the cuts are drawn from.
	var span time.Duration
	t.Run("measure", func(t *testing.T) {
		b := newBoard(t, v1Dir, v1Im)
		m := b.up("a", "dev")
		kvURL, up := b.urls()
		w := startWriter(kvURL, "measure")
		time.Sleep(500 * time.Millisecond) // answers before the command
		r := startCmd("update", "-json", "-config", v2, v2Dir, up)
		m = b.drive(m, r, time.Time{})
		time.Sleep(500 * time.Millisecond)
		w.Stop()
		var rep updateReport
		json.Unmarshal(r.stdout.Bytes(), &rep)
		if r.err != nil || rep.Result != UpdateCommitted {
			t.Fatalf("update: %v, %+v\n%s", r.err, rep, r.stderr)
		}
		span = r.end.Sub(r.start)
		reboot, ok := r.stderr.when("rebooting into it on trial")
		first, ok2 := w.firstAnswer(reboot, newer.version)
		if !ok || !ok2 {
			t.Fatalf("no reboot line (%v) or no answer from kv %s after it (%v)\n%s", ok, newer.version, ok2, r.stderr)
		}
		n := w.check(t, kvURL, "after the update")
		// Figures, never asserted: QEMU's power-on after the reset is in
		// the downtime (a board resets by itself).
		t.Logf("figures: update end to end %v; the reboot request to kv's first answer on slot b %v; kv unanswered for %v at most (host polling); %d acknowledged writes read back (QEMU %s)",
			span.Round(time.Millisecond), first.Sub(reboot).Round(time.Millisecond), w.longestGap(r.start, r.end).Round(time.Millisecond), n, m.Accel)
	})
	if span == 0 {
		t.FailNow()
	}
	span = cutSpans(t, "NVBOOT_UPDATE_SEED", seed, "NVBOOT_UPDATE_SPAN", span)[0]

	for i := 1; i <= cuts; i++ {
		at := time.Duration(rng.Int64N(int64(span * 5 / 4)))
		t.Run(fmt.Sprintf("cut%d", i), func(t *testing.T) {
			b := newBoard(t, v1Dir, v1Im)
			m := b.up("a", "dev")
			kvURL, up := b.urls()
			w := startWriter(kvURL, fmt.Sprintf("cut%d", i))
			r := startCmd("update", "-json", "-config", v2, v2Dir, up)
			cutAt := r.start.Add(at)
			cutM := b.drive(m, r, cutAt)
			w.Stop()
			// nvinit logs the commit after BootOrder is written.
			said := strings.Contains(cutM.Console(), "slot b: every service is ready: committed")
			// What update had said by the cut.
			var told string
			if r.finished() && r.end.Before(cutAt) {
				var rep updateReport
				json.Unmarshal(r.stdout.Bytes(), &rep)
				told = rep.Result
			}
			m, f := b.committedBoot(b.boot())
			code, _, ver := kvGet(t, kvURL, "/healthz")
			got := runs{f.Slot, f.Image, ver}
			t.Logf("cut %d at %v of %v after update's start (its last line: %q); update had said %q, nvinit committed %v; the board runs slot %s, kv %q, after %d boots",
				i, at.Round(time.Millisecond), span.Round(time.Millisecond), r.stderr.last(cutAt), told, said, f.Slot, ver, b.boots)
			switch {
			case code != 200:
				t.Fatalf("cut %d: kv answers %d", i, code)
			case got != old && got != newer:
				t.Fatalf("cut %d: the board runs %+v: neither the old image %+v nor the new %+v whole", i, got, old, newer)
			case told == UpdateCommitted && got != newer:
				t.Fatalf("cut %d: update said committed, but the board runs the old image", i)
			case said && got != newer:
				t.Fatalf("cut %d: nvinit said slot b was committed, but the board runs the old image", i)
			}
			n := w.check(t, kvURL, fmt.Sprintf("cut %d", i))
			t.Logf("cut %d: %d acknowledged writes read back", i, n)
			r.wait(5 * time.Second)
			m.Kill()
		})
	}
}
