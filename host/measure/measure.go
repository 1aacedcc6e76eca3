package measure

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/vm"
)

// Options say what Run measures and on which machine.
type Options struct {
	// Image is the build of every layout (Config, Kernel, ModuleRoot,
	// ConfigDir, Logf); Run sets its Layout and Out.
	Image   appliance.Options
	Layouts []appliance.Layout // off2f is compared with each other one
	Runs    int                // cold boots per layout, at least 1
	Storage vm.Storage         // the disk's speed model
	Machine Machine
	// Work keeps the images (Work/<layout>), the pmem their first boot
	// left (Work/prepared/<layout>) and the runs (Work/runs); it must be
	// absolute or relative to a directory nothing changes. "": a temporary
	// directory, removed when Run returns.
	Work string
	// Logf takes the progress, a line per call; nil: quiet.
	Logf func(format string, args ...any)
	// Profile adds one profiled boot per layout after the measured ones
	// (ProfileCmdline on its command line): Report.Profiles. With Work
	// set, its console is kept there as profile-<layout>.console.
	Profile bool
}

// buildLayouts builds the image of each layout into dir/<layout> and
// locks each: its boots read it in place, and no build may replace it
// meanwhile. unlock releases them all.
func buildLayouts(ctx context.Context, image appliance.Options, ls []appliance.Layout, dir string, logf func(string, ...any)) (map[appliance.Layout]*appliance.Image, func(), error) {
	images := map[appliance.Layout]*appliance.Image{}
	var unlocks []func()
	unlock := func() {
		for _, u := range unlocks {
			u()
		}
	}
	for _, l := range ls {
		logf("building the %s image", l)
		bo := image
		bo.Layout, bo.Out = l, filepath.Join(dir, string(l))
		im, err := appliance.Build(ctx, bo)
		if err != nil {
			unlock()
			return nil, nil, fmt.Errorf("building the %s image: %w", l, err)
		}
		images[l] = im
		u, err := appliance.LockImage(bo.Out)
		if err != nil {
			unlock()
			return nil, nil, err
		}
		unlocks = append(unlocks, u)
	}
	return images, unlock, nil
}

// bootTimeout bounds one measured boot, up to its first answer.
const bootTimeout = 3 * time.Minute

// Run builds the image once per layout, boots each once untimed (the first
// boot of a device: the service creates its state) and powers it off
// cleanly, then cold-boots each o.Runs times, interleaved, every boot from
// a fresh copy of the pmem that first boot left. The doc comment of the
// package says what each boot measures.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Runs < 1 {
		return nil, fmt.Errorf("measure: %d runs: want at least 1", o.Runs)
	}
	if len(o.Layouts) == 0 {
		return nil, errors.New("measure: no layout to measure")
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	dir, cleanup, err := workDir(o.Work, "nvboot-measure-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	ls, mach, prof := o.Layouts, o.Machine, o.Storage
	imageDir := func(l appliance.Layout) string { return filepath.Join(dir, string(l)) }
	// boot is how every boot of l starts: from the pmem its first boot left.
	boot := func(l appliance.Layout) appliance.BootOptions {
		b := mach.BootOptions(prof)
		b.PmemDir = filepath.Join(dir, "prepared", string(l))
		return b
	}
	images, unlock, err := buildLayouts(ctx, o.Image, ls, dir, logf)
	if err != nil {
		return nil, err
	}
	defer unlock()
	for _, l := range ls {
		logf("%s: first boot, to create the service's state (not timed)", l)
		if err := prepare(ctx, imageDir(l), images[l], boot(l).PmemDir, mach.BootOptions(prof)); err != nil {
			return nil, fmt.Errorf("%s: %w", l, err)
		}
	}
	for _, l := range ls {
		if k, err := appliance.BootKernelOf(imageDir(l), images[l], boot(l)); err == nil {
			logf("%s: %s", l, k.Describe())
		}
	}
	entries := map[appliance.Layout]time.Duration{}
	if mach.Clock == vm.ClockDevice {
		for _, l := range ls {
			e, err := kernelEntry(ctx, imageDir(l), images[l], boot(l))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l, err)
			}
			entries[l] = e
			logf("%s: the firmware hands over to the kernel %.1f ms after power-on", l, ms(e))
		}
	}
	logf("%s; storage %s", mach.String(cmp.Or(mach.Accel, "chosen at start")), prof.About)
	rep := &Report{Storage: prof, Machine: mach, Layouts: ls, Runs: map[appliance.Layout][]*Boot{}, Images: images}
	for r := 1; r <= o.Runs; r++ {
		// Each round starts one layout further on, so no layout always
		// boots first (or right after the same neighbour).
		for i := range ls {
			l := ls[(i+r-1)%len(ls)]
			runDir := filepath.Join(dir, "runs", fmt.Sprintf("%s-%d", l, r))
			res, err := bootOnce(ctx, imageDir(l), images[l], runDir, boot(l), entries[l], bootTimeout, false)
			if err != nil {
				return nil, fmt.Errorf("%s boot %d: %w", l, r, err)
			}
			os.RemoveAll(runDir)
			rep.Accel = res.Accel
			rep.Runs[l] = append(rep.Runs[l], res)
			logf("%s boot %d/%d: service answered %.0f ms after power-on (init at %.0f ms)", l, r, o.Runs,
				ms(res.Stages[StageService]), ms(res.Stages[StageInit]))
		}
	}
	if o.Profile {
		rep.Profiles = map[appliance.Layout]*Profile{}
		syms := symbolsFor(o.Image.Kernel)
		for _, l := range ls {
			b := boot(l)
			b.ExtraCmdline = strings.TrimSpace(b.ExtraCmdline + " " + ProfileCmdline)
			runDir := filepath.Join(dir, "runs", string(l)+"-profile")
			res, err := bootOnce(ctx, imageDir(l), images[l], runDir, b, entries[l], bootTimeout, true)
			if err != nil {
				return nil, fmt.Errorf("%s profiled boot: %w", l, err)
			}
			os.RemoveAll(runDir)
			if o.Work != "" {
				// Kept for a closer look: every kernel log record and mark.
				if err := os.WriteFile(filepath.Join(dir, "profile-"+string(l)+".console"), []byte(res.Console), 0o644); err != nil {
					return nil, err
				}
			}
			rep.Profiles[l] = parseProfile(res, res.Console, res.logBase, res.marks, syms)
			logf("%s profiled boot: service answered %.1f ms after power-on", l, ms(res.Stages[StageService]))
		}
	}
	return rep, nil
}

// workDir is the directory a measurement builds its images in: work made
// absolute (the builds run go build and make in other directories), or a
// temporary one named by prefix, removed by cleanup.
func workDir(work, prefix string) (dir string, cleanup func(), err error) {
	if work != "" {
		if dir, err = filepath.Abs(work); err != nil {
			return "", nil, fmt.Errorf("work directory %s: %w", work, err)
		}
		return dir, func() {}, nil
	}
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
