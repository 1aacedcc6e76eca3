package measure

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
)

// How the guests of a density run start.
const (
	// StartStaggered starts each guest once the one before has answered:
	// every boot beside idle guests, the steady state of a host that
	// adds appliances one by one.
	StartStaggered = "staggered"
	// StartBurst starts all N at once: every boot beside N-1 booting
	// ones, a host's cold start.
	StartBurst = "burst"
)

// DefaultSettle is how long a density run waits after the last answer
// before it reads the memory: the guests' services are up and idle, and
// their kernels have reported the memory they freed (Linux waits 2 s
// before it reports). The run then reads again each second until no
// guest's RAM shrank by more than settledBytes, up to maxSettleReads.
const DefaultSettle = 5 * time.Second

const (
	settledBytes   = 1 << 20
	maxSettleReads = 30
)

// DensityOptions say what RunDensity measures.
type DensityOptions struct {
	// Image is the build of every layout, as Options.Image.
	Image   appliance.Options
	Layouts []appliance.Layout // off2f is compared with each other one
	Counts  []int              // N: how many guests each run starts, each at least 1
	Starts  []string           // StartStaggered, StartBurst
	Storage vm.Storage
	// Machine must be the wall clock: a guest's device clock counts its
	// own instructions, the same for any N (what the host's load does to
	// a boot is the question here), and it would read each guest's disk
	// from a pmem copy of its own. Its PmemAs is not used: the guests'
	// pmem is NVDIMMs, the text store one read-only file for all.
	Machine Machine
	// Work keeps the images, the pmem their first boot left
	// (Work/prepared/<layout>) and the guests' pmem while they run
	// (Work/density); "": a temporary directory, removed at the end.
	Work string
	// Logf takes the progress; nil: quiet.
	Logf func(format string, args ...any)
	// Settle is the wait after the last answer before the memory is read;
	// 0: DefaultSettle.
	Settle time.Duration
	// TCGCacheMiB is each guest's TCG translation cache under TCG;
	// 0: appliance.SharedTCGCacheMiB.
	TCGCacheMiB int
}

// DensityRun is N guests of one image, all up at once.
type DensityRun struct {
	Layout appliance.Layout
	Start  string
	N      int
	// Answers are each guest's power-on to its first answer, in the
	// order the guests started.
	Answers []time.Duration
	// AllAnswered is from the first guest's power-on to the last answer.
	AllAnswered time.Duration
	// QEMUs are each guest's QEMU's memory, read once all had answered.
	QEMUs []qemuMemory
	// Cached is what the host's page cache held of each file every guest
	// uses (by base name) once all had answered: read-ahead included, and
	// pages no guest maps (the disk's, which each guest caches in its own
	// RAM). Shared is what it still held of each after the host dropped
	// what it could (POSIX_FADV_DONTNEED): the pages the guests map, each
	// once, which the host must keep while they run. Dropped is what it
	// held of them all before the first guest started, after the same drop.
	Cached  map[string]int64
	Shared  map[string]int64
	Dropped int64
	Accel   string
}

// HostBytes is what the N guests cost the host: every QEMU's own memory
// (its Pss less its share of the shared files' mappings) and the pages of
// the shared files the host must keep for them, once (Shared).
func (r *DensityRun) HostBytes() int64 {
	var n int64
	for _, q := range r.QEMUs {
		n += q.Own()
	}
	for _, b := range r.Shared {
		n += b
	}
	return n
}

// PerAppliance is HostBytes over N, in MiB.
func (r *DensityRun) PerAppliance() float64 { return mib(r.HostBytes()) / float64(r.N) }

// TCGBytes is what the N QEMUs' TCG translation caches hold: the
// emulator's cost, which a KVM host does not pay.
func (r *DensityRun) TCGBytes() int64 {
	var n int64
	for _, q := range r.QEMUs {
		n += q.TCGPss
	}
	return n
}

// GuestBytes is what the image decides of HostBytes: the N guests' RAM
// and the shared files' pages, without what each QEMU costs beside its
// guest's RAM (its own code and heap, TCG's translation cache and
// metadata), which is the same for every image.
func (r *DensityRun) GuestBytes() int64 {
	var n int64
	for _, q := range r.QEMUs {
		n += q.RAMPss
	}
	for _, b := range r.Shared {
		n += b
	}
	return n
}

// PerApplianceGuest is GuestBytes over N, in MiB.
func (r *DensityRun) PerApplianceGuest() float64 { return mib(r.GuestBytes()) / float64(r.N) }

// PerApplianceNoTCG is PerAppliance without the TCG translation caches.
func (r *DensityRun) PerApplianceNoTCG() float64 {
	return mib(r.HostBytes()-r.TCGBytes()) / float64(r.N)
}

// MappedShared is how much of the shared files the guests map, each page
// once (the sum of their QEMUs' Pss of those mappings): the text store's
// pages the guests touched, without what the host's read-ahead cached
// around them.
func (r *DensityRun) MappedShared() int64 {
	var n int64
	for _, q := range r.QEMUs {
		n += q.SharedPss
	}
	return n
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// DensityReport is a density measurement: every run of every layout.
type DensityReport struct {
	Storage vm.Storage
	Accel   string
	Machine Machine
	MemMiB  int // each guest's RAM
	Settle  time.Duration
	Layouts []appliance.Layout
	Counts  []int
	Starts  []string
	// TCGCacheMiB is each guest's TCG translation cache (under TCG).
	TCGCacheMiB int
	Runs        []*DensityRun
	Images      map[appliance.Layout]*appliance.Image
	// ReadAheadKiB is the read-ahead of the block device under the work
	// directory, which the shared files' cached pages depend on; 0:
	// unknown.
	ReadAheadKiB int
	// ShmemTHP is the host's transparent huge page mode for shared memory
	// (never, advise, ...), which decides whether the guests' memfd RAM is
	// in 4 KiB pages; "": unknown.
	ShmemTHP string
}

// Run returns the run of layout l, start and n; nil when there is none.
func (r *DensityReport) Run(l appliance.Layout, start string, n int) *DensityRun {
	for _, x := range r.Runs {
		if x.Layout == l && x.Start == start && x.N == n {
			return x
		}
	}
	return nil
}

// RunDensity builds each layout's image, boots it once to create its state
// (not measured), then for every start and N starts N guests of it at
// once, every one mapping the image's text store read-only
// (appliance.BootOptions.SharedText) with a copy of that state of its
// own, waits for each one's first answer, and reads what they cost the
// host (hostmem.go) once all have answered and Settle has passed.
func RunDensity(ctx context.Context, o DensityOptions) (*DensityReport, error) {
	if len(o.Layouts) == 0 {
		return nil, errors.New("measure: no layout to measure")
	}
	if len(o.Counts) == 0 {
		return nil, errors.New("measure: no number of guests to start")
	}
	for _, n := range o.Counts {
		if n < 1 {
			return nil, fmt.Errorf("measure: %d guests: want at least 1", n)
		}
	}
	for _, s := range o.Starts {
		if s != StartStaggered && s != StartBurst {
			return nil, fmt.Errorf("measure: start %q: want %s or %s", s, StartStaggered, StartBurst)
		}
	}
	if len(o.Starts) == 0 {
		return nil, errors.New("measure: no start (staggered, burst)")
	}
	if o.Machine.Clock != vm.ClockWall {
		return nil, fmt.Errorf("measure: density on the %s clock: it runs on the wall clock (a guest's device clock is its own, the same for any N, and reads its disk from a pmem copy of its own)", o.Machine.Clock)
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	dir, cleanup, err := workDir(o.Work, "nvboot-density-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	images, unlock, err := buildLayouts(ctx, o.Image, o.Layouts, dir, logf)
	if err != nil {
		return nil, err
	}
	defer unlock()
	mach := o.Machine
	mach.PmemAs = vm.PmemNVDIMM
	boot := mach.BootOptions(o.Storage)
	boot.SharedText = true
	boot.TCGCacheMiB = cmp.Or(o.TCGCacheMiB, appliance.SharedTCGCacheMiB)
	rep := &DensityReport{Storage: o.Storage, Machine: mach, MemMiB: cmp.Or(mach.MemMiB, appliance.DefaultMemMiB),
		Settle: cmp.Or(o.Settle, DefaultSettle), Layouts: o.Layouts, Counts: o.Counts, Starts: o.Starts, Images: images,
		TCGCacheMiB: boot.TCGCacheMiB}
	rep.ReadAheadKiB = readAheadKiB(dir)
	rep.ShmemTHP = shmemTHP()
	d := &density{dir: dir, images: images, boot: boot, settle: rep.Settle, ramBytes: int64(rep.MemMiB) << 20, logf: logf}
	for _, l := range o.Layouts {
		logf("%s: first boot, to create the service's state (not measured)", l)
		if err := prepare(ctx, d.imageDir(l), images[l], d.prepared(l), boot); err != nil {
			return nil, fmt.Errorf("%s: %w", l, err)
		}
	}
	logf("wall clock (QEMU %s); storage %s; %d MiB of RAM a guest; the text store shared read-only", cmp.Or(mach.Accel, "chosen at start"), o.Storage.About, rep.MemMiB)
	for _, n := range o.Counts {
		for _, start := range o.Starts {
			for _, l := range o.Layouts {
				r, err := d.run(ctx, l, start, n)
				if err != nil {
					return nil, fmt.Errorf("%s, %d guests %s: %w", l, n, start, err)
				}
				rep.Runs = append(rep.Runs, r)
				rep.Accel = r.Accel
				logf("%s, %d %s: %.1f MiB an appliance; answers %.0f ms (median), all by %.0f ms", l, n, start,
					r.PerAppliance(), medianMS(r.Answers), ms(r.AllAnswered))
			}
		}
	}
	return rep, nil
}

// density is what every run of RunDensity shares.
type density struct {
	dir      string
	images   map[appliance.Layout]*appliance.Image
	boot     appliance.BootOptions
	settle   time.Duration
	ramBytes int64
	logf     func(string, ...any)
}

func (d *density) imageDir(l appliance.Layout) string { return filepath.Join(d.dir, string(l)) }
func (d *density) prepared(l appliance.Layout) string {
	return filepath.Join(d.dir, "prepared", string(l))
}

// sharedFiles are the files of l's image every guest uses: the text
// store it maps, the disk and the kernel (and initramfs) it reads.
func (d *density) sharedFiles(l appliance.Layout) ([]string, error) {
	im := d.images[l]
	k, err := appliance.BootKernelOf(d.imageDir(l), im, d.boot)
	if err != nil {
		return nil, err
	}
	files := []string{k.Path}
	for _, f := range []string{outdir.TextPmemFile, im.Disk, im.Initrd} {
		if f != "" {
			files = append(files, filepath.Join(d.imageDir(l), f))
		}
	}
	for i, f := range files {
		if files[i], err = realPath(f); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// run starts n guests of l, as start says, and measures them.
func (d *density) run(ctx context.Context, l appliance.Layout, start string, n int) (*DensityRun, error) {
	im := d.images[l]
	shared, err := d.sharedFiles(l)
	if err != nil {
		return nil, err
	}
	r := &DensityRun{Layout: l, Start: start, N: n, Cached: map[string]int64{}, Shared: map[string]int64{}}
	for _, f := range shared {
		left, err := dropCache(f)
		if err != nil {
			return nil, err
		}
		if left > 0 {
			// Mapped by some process: counted with what the guests bring.
			d.logf("%s: %.1f MiB of %s stay in the page cache before the guests start", l, mib(left), f)
		}
		r.Dropped += left
	}
	svc, err := probeService(d.imageDir(l), im)
	if err != nil {
		return nil, err
	}
	runDir := filepath.Join(d.dir, "density", fmt.Sprintf("%s-%s-%d", l, start, n))
	defer os.RemoveAll(runDir)
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	opts := make([]appliance.BootOptions, n)
	for i := range opts {
		g := filepath.Join(runDir, fmt.Sprintf("guest%d", i))
		if err := os.MkdirAll(g, 0o755); err != nil {
			return nil, err
		}
		if err := appliance.CopyGuestPmem(d.prepared(l), im, g); err != nil {
			return nil, err
		}
		opts[i] = d.boot
		opts[i].PmemDir = g
	}
	// Every guest lives until the memory is read: the run has a boot's
	// timeout for each of its guests, all together.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(n)*bootTimeout+d.settle+time.Minute)
	defer cancel()
	served := make([]*Served, n)
	errs := make([]error, n)
	defer func() {
		for _, s := range served {
			if s != nil {
				s.VM.Kill()
			}
		}
	}()
	serve := func(i int) {
		served[i], errs[i] = serveOn(ctx, d.imageDir(l), im, svc, opts[i], ports[i])
	}
	switch start {
	case StartStaggered:
		for i := range n {
			if serve(i); errs[i] != nil {
				break
			}
		}
	case StartBurst:
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); serve(i) }()
		}
		wg.Wait()
	}
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("guest %d of %d: %w", i+1, n, err)
		}
	}
	first, last := served[0].VM.Start, time.Time{}
	for _, s := range served {
		r.Answers = append(r.Answers, s.Answered)
		if s.VM.Start.Before(first) {
			first = s.VM.Start
		}
		if at := s.VM.Start.Add(s.Answered); at.After(last) {
			last = at
		}
		r.Accel = s.VM.Accel
	}
	r.AllAnswered = last.Sub(first)
	select {
	case <-time.After(d.settle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for reads := 1; ; reads++ {
		qs, err := d.readQEMUs(served, shared)
		if err != nil {
			return nil, err
		}
		settled := r.QEMUs != nil
		for i, q := range qs {
			if settled && q.RAMPss < r.QEMUs[i].RAMPss-settledBytes {
				settled = false
			}
		}
		r.QEMUs = qs
		if settled || reads == maxSettleReads {
			break
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	for _, f := range shared {
		b, err := residentBytes(f)
		if err != nil {
			return nil, err
		}
		r.Cached[filepath.Base(f)] = b
		if b, err = dropCache(f); err != nil {
			return nil, err
		}
		r.Shared[filepath.Base(f)] = b
	}
	return r, nil
}

// readQEMUs reads the memory of every guest's QEMU, each still running.
func (d *density) readQEMUs(served []*Served, shared []string) ([]qemuMemory, error) {
	var qs []qemuMemory
	for i, s := range served {
		select {
		case <-s.VM.Done():
			return nil, fmt.Errorf("guest %d of %d ended before its memory was read: %v; console:\n%s", i+1, len(served), s.VM.Wait(context.Background()), s.VM.ConsoleTail(25))
		default:
		}
		q, err := readQEMUMemory(s.VM.Pid(), shared, d.ramBytes)
		if err != nil {
			return nil, fmt.Errorf("guest %d of %d: %w", i+1, len(served), err)
		}
		qs = append(qs, q)
	}
	return qs, nil
}

// freePorts are n host ports free at once on 127.0.0.1, held until all
// are found, so that no two guests get the same one.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding %d free host ports: %w", n, err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func medianMS(ds []time.Duration) float64 {
	v := make([]float64, len(ds))
	for i, d := range ds {
		v[i] = ms(d)
	}
	return benchjson.Stats("", "ms", v).Median
}
