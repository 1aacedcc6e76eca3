package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/measure"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/atomicfile"
	"github.com/nvboot/nvboot/internal/checkout"
	"github.com/nvboot/nvboot/internal/cli"
)

const description = `Measures power-on to service of appliances of growing text size, each as
'nvboot measure' does (the same code: every layout built, booted once
untimed, then cold-booted -runs times, interleaved), and charts power_on_to_service
and init_to_service of each layout against the text size of the services
started at boot.

The sizes are the image configs of -configs, each named after its file
(big.json: "big"). By default they are examples/big/small.json (kv alone),
examples/big/mid.json (the NATS server and kv) and examples/big.json (Caddy
and kv), relative to the nvboot checkout; a -configs path is relative to the
current directory. Each config's first service with a ForwardPort is the one
whose first answer is timed.

The text size (x of the chart) is the memory size of the read-only PT_LOADs
(text, rodata, pclntab) of the services nvinit starts at boot, from the off2f
image's image.json: what OFF2F moves into the text store on pmem, and what
the ELF layout maps from the disk. nvinit's own (the same in every image) is
reported apart, as text_nvinit.

After each size's measure, -bootstat (on by default) boots each layout once
more with bench/bigapp/cmd/bootstat added: it samples the disk's reads
against the guest's clock and, when the timed service listens, reads each
process's faults, mapped text and page-cached program file; nvinit times the
first answer. The table then says what each layout read from the disk by
that answer and how long the storage model needs for it.

-scale N boots each layout -runs times more on the time-scaled device: the
counted core and the storage model N times slower, QEMU holding guest time
to the host's (-icount align=on), the times divided by N. Under -clock device
the disk throttle runs on the host's clock while a busy guest's time counts
instructions, so reads that overlap the guest's work look nearly free; the
scaled device puts both on one clock (docs/BENCHMARKS.md#big-appliance).

It prints a table per size (median of the runs) and the ratios of off2f to
each other layout; with -json one object instead:
{"bench":"bigapp","env":{...},"ratios":{"<size>.<span>.off2f_vs_<layout>",
 "<size>.scaled.<span>.off2f_vs_<layout>",...},"results":[{"name":"<size>.<layout>.<stage
 or span>",...},{"name":"<size>.text_services","unit":"MiB",...},{"name":
 "<size>.<layout>.disk_read",...},{"name":"<size>.scaled.<layout>.<span>",...},...]}
Progress goes to stderr, each line of a size's measure prefixed with its name.
With -chart FILE it writes the chart (SVG, two panels) there, and beside it
a boot chart per size (FILE without .svg, then -boot-<size>.svg: each
layout's median boot, its stages in the order they happened, as nvboot
measure -charts draws them); the directory is checked to be writable before
anything is built.

Long: with the defaults, 2 to 4 minutes per size on 2 shared cores, and as
much again with -scale 16 (the first build of Caddy takes minutes more).
The machine is shared: take /tmp/nvboot-bench.lock (flock) as the other
benchmarks do.`

const examples = `  go run ./bench/bigapp -chart out/charts/bigapp.svg
  flock /tmp/nvboot-bench.lock go run ./bench/bigapp -clock device -storage sd -runs 3 -scale 16 -json -chart docs/measure/bigapp.svg > out/bigapp.json
  go run ./bench/bigapp -configs examples/big/small.json,examples/big.json -layouts off2f,elf -runs 1
  go run ./bench/bigapp -scale 16 -chart out/charts/bigapp.svg   # and the time-scaled device, dashed
  go run ./bench/bigapp -bootstat=false -runs 5
  go run ./bench/bigapp -work /var/tmp/bigapp    # keep the images and runs`

// defaultConfigs are the sizes, smallest first, relative to the checkout.
var defaultConfigs = []string{"examples/big/small.json", "examples/big/mid.json", "examples/big.json"}

// options are what the command line sets.
type options struct {
	Configs []size   // the sizes, in the order given
	Layouts []string // off2f first
	Runs    int
	Storage string
	Clock   string
	CPURate string          // "": measure's default
	Machine measure.Machine // what Clock and CPURate resolve to
	Kernel  string
	Arch    string // -arch, as nvboot measure's: "" the config's
	Work    string // "": a temporary directory, removed
	Chart   string // "": no chart
	JSON    bool
	// Bootstat adds a diagnostic boot per layout and size (with
	// cmd/bootstat in the image): disk reads, faults, resident text.
	Bootstat bool
	// Scale > 0 adds Runs boots per layout and size on the time-scaled
	// device (scaled.go): core and disk Scale times slower, QEMU holding
	// guest time to the host's.
	Scale int
}

// size is one image config measured.
type size struct {
	Name   string // the file's name without .json
	Config string // its path, absolute
}

func parseFlags(c *cli.Context) (*options, error) {
	fs := cli.FlagSet(c, "bigapp", "go run ./bench/bigapp [-configs A.json,...] [-layouts off2f,L,...] [-runs N] [-chart FILE] [-json]", description, examples)
	configs := fs.String("configs", "", "image config `files`, comma-separated, smallest first; empty: "+strings.Join(defaultConfigs, ","))
	layouts := fs.String("layouts", "off2f,elf,dax-elf", "layouts to measure, comma-separated: off2f and at least one other")
	o := &options{}
	fs.IntVar(&o.Runs, "runs", 3, "cold boots per layout and size")
	fs.StringVar(&o.Storage, "storage", "sd", "disk speed model (see nvboot measure -h)")
	fs.StringVar(&o.Clock, "clock", "device", "device or wall (see nvboot measure -h)")
	fs.StringVar(&o.CPURate, "cpu-rate", "", "device clock: guest instructions per second; empty: measure's default (1e9)")
	fs.StringVar(&o.Kernel, "kernel", "", "the kernel (a bzImage, an arm64 Image); empty: $NVBOOT_KERNEL ($NVBOOT_KERNEL_ARM64) or the cached kernel-config/ build")
	fs.StringVar(&o.Arch, "arch", "", "build for this GOARCH (amd64, arm64) or target (amd64-pc, arm64-virt), over each config's, as nvboot measure -arch; empty: each config's")
	fs.StringVar(&o.Work, "work", "", "keep each size's images and runs under this `directory` (DIR/<size>); empty: a temporary one, removed")
	fs.StringVar(&o.Chart, "chart", "", "write the chart (SVG) to this `file`; empty: none")
	fs.BoolVar(&o.JSON, "json", false, "print the result as one JSON object on stdout")
	fs.IntVar(&o.Scale, "scale", 0, "also boot each layout -runs times on a device `N` times slower, core and disk, with QEMU holding guest time to the host's (-icount align=on), times divided by N: the disk and the core on one clock (a power of two; 0: not)")
	fs.BoolVar(&o.Bootstat, "bootstat", true, "after each size's measure, one diagnostic boot per layout with bench/bigapp/cmd/bootstat added (disk reads, faults, resident text at the first answer)")
	if err := cli.Parse(fs, c.Args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("unexpected arguments %q", fs.Args())
	}
	if o.Runs < 1 {
		return nil, cli.Usagef("-runs %d: want at least 1", o.Runs)
	}
	if o.Scale != 0 {
		if _, err := scaleShift(o.Scale); err != nil {
			return nil, cli.Usagef("%v", err)
		}
		if o.Clock != vm.ClockDevice {
			return nil, cli.Usagef("-scale is for -clock device: it slows the counted core")
		}
	}
	if _, err := vm.Profile(o.Storage); err != nil {
		return nil, cli.Usagef("-storage: %v", err)
	}
	var err error
	if o.Machine, err = machine(o.Clock, o.CPURate); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(*layouts, ",") {
		l = strings.TrimSpace(l)
		if _, err := appliance.ParseLayout(l); err != nil {
			return nil, cli.Usagef("-layouts: %v", err)
		}
		if seen[l] {
			return nil, cli.Usagef("-layouts: %s twice", l)
		}
		seen[l] = true
		if l == string(appliance.OFF2F) {
			o.Layouts = append([]string{l}, o.Layouts...)
		} else {
			o.Layouts = append(o.Layouts, l)
		}
	}
	if !seen[string(appliance.OFF2F)] || len(o.Layouts) < 2 {
		return nil, cli.Usagef("-layouts %q: want off2f and at least one layout to compare it with", *layouts)
	}
	paths, base := defaultConfigs, ""
	if *configs != "" {
		paths = strings.Split(*configs, ",")
	} else {
		root, err := checkout.Root(context.Background(), "")
		if err != nil {
			return nil, fmt.Errorf("%w; or name the configs with -configs", err)
		}
		base = root
	}
	names := map[string]string{}
	for _, p := range paths {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, cli.Usagef("-configs %q: an empty name", *configs)
		}
		if base != "" {
			p = filepath.Join(base, p)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("-configs %s: %w", p, err)
		}
		// Loaded now: a misspelt field fails before minutes of builds.
		if _, err := config.Load(abs); err != nil {
			return nil, fmt.Errorf("-configs: %w", err)
		}
		name := strings.TrimSuffix(filepath.Base(abs), ".json")
		if other, dup := names[name]; dup {
			return nil, cli.Usagef("-configs: %s and %s are both named %q (sizes are named after their files)", other, p, name)
		}
		names[name] = p
		o.Configs = append(o.Configs, size{Name: name, Config: abs})
	}
	return o, nil
}

func run(ctx context.Context, c *cli.Context, eng engine) error {
	o, err := parseFlags(c)
	if err != nil {
		return err
	}
	if o.Chart != "" {
		if err := checkWritable(filepath.Dir(o.Chart)); err != nil {
			return fmt.Errorf("-chart %s: %w", o.Chart, err)
		}
	}
	work := o.Work
	if work == "" {
		if work, err = os.MkdirTemp("", "nvboot-bigapp-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	} else if work, err = filepath.Abs(work); err != nil {
		return fmt.Errorf("-work %s: %w", o.Work, err)
	}
	start := time.Now()
	prof, err := vm.Profile(o.Storage)
	if err != nil {
		return err
	}
	rep := &report{Layouts: o.Layouts, Runs: o.Runs, Storage: prof, Scale: o.Scale}
	var layouts []appliance.Layout
	for _, l := range o.Layouts {
		layouts = append(layouts, appliance.Layout(l))
	}
	for i, sz := range o.Configs {
		fmt.Fprintf(c.Stderr, "bigapp: size %d/%d: %s (%s), %.0f s so far\n", i+1, len(o.Configs), sz.Name, sz.Config, time.Since(start).Seconds())
		dir := filepath.Join(work, sz.Name)
		lw := &lineWriter{w: c.Stderr, prefix: "[" + sz.Name + "] "}
		res, err := measureSize(ctx, o, eng, sz, layouts, prof, dir, lw)
		lw.Flush()
		if err != nil {
			return fmt.Errorf("size %s (%s): %w", sz.Name, sz.Config, err)
		}
		rep.Sizes = append(rep.Sizes, *res)
	}
	fmt.Fprintf(c.Stderr, "bigapp: done in %.0f s\n", time.Since(start).Seconds())
	if o.JSON {
		err = cli.JSON(c.Stdout, rep.output())
	} else {
		err = rep.writeTable(c.Stdout)
	}
	if err != nil || o.Chart == "" {
		return err
	}
	if err := atomicfile.WriteFile(o.Chart, rep.chart(), 0o644); err != nil {
		return fmt.Errorf("-chart %s: %w (the results are printed above)", o.Chart, err)
	}
	fmt.Fprintf(c.Stderr, "bigapp: chart %s\n", o.Chart)
	for _, s := range rep.Sizes {
		p := bootChartPath(o.Chart, s.Name)
		title := fmt.Sprintf("bench/bigapp, size %s: %s MiB of the services' text", s.Name, serviceList(s.Text))
		if err := atomicfile.WriteFile(p, s.Report.Chart(title), 0o644); err != nil {
			return fmt.Errorf("-chart %s: %w (the results are printed above)", p, err)
		}
		fmt.Fprintf(c.Stderr, "bigapp: boot chart %s\n", p)
	}
	return nil
}

// bootChartPath is where the boot chart of a size goes, beside the chart:
// out/bigapp.svg, size big: out/bigapp-boot-big.svg.
func bootChartPath(chart, size string) string {
	return strings.TrimSuffix(chart, ".svg") + "-boot-" + size + ".svg"
}

// measureSize measures one size: its layouts (measure.Run), the text of
// its off2f image, and as o asks the diagnostic boots and the time-scaled
// device.
func measureSize(ctx context.Context, o *options, eng engine, sz size, layouts []appliance.Layout, prof vm.Storage, dir string, lw *lineWriter) (*sizeResult, error) {
	in, err := eng.inputs(ctx, sz.Config, o.Kernel, o.Arch, lw)
	if err != nil {
		return nil, err
	}
	log := cli.NewProgress(lw)
	mo := measure.Options{Image: in, Layouts: layouts, Runs: o.Runs, Storage: prof, Machine: o.Machine, Work: dir, Logf: log.Printf}
	m, err := eng.measure(ctx, mo)
	if err != nil {
		return nil, fmt.Errorf("measuring %s: %w", strings.Join(o.Layouts, ", "), err)
	}
	im := m.Images[appliance.OFF2F]
	if im == nil {
		return nil, errors.New("measuring: no off2f image")
	}
	txt, err := textOf(im)
	if err != nil {
		return nil, err
	}
	res := &sizeResult{size: sz, Text: txt, Measure: m.Output(), Report: m}
	if o.Bootstat {
		if res.Bootstat, err = runBootstat(ctx, o, eng, sz, in, filepath.Join(dir, "bootstat"), lw); err != nil {
			return nil, err
		}
	}
	if o.Scale > 0 {
		if res.Scaled, err = runScaled(ctx, o, dir, lw); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// machine is the guest nvboot measure's -clock and -cpu-rate give, its
// other flags at their defaults.
func machine(clock, rate string) (measure.Machine, error) {
	m := measure.Machine{Clock: clock, PmemAs: appliance.DefaultPmemAs, MemMiB: appliance.DefaultMemMiB}
	switch clock {
	case vm.ClockWall:
		if rate != "" {
			return m, cli.Usagef("-cpu-rate is for -clock device: the wall clock runs at the host's speed")
		}
		return m, nil
	case vm.ClockDevice:
	default:
		return m, cli.Usagef("-clock %q: want device or wall", clock)
	}
	m.Accel, m.CPURate = "tcg", vm.DefaultCPURate
	if rate != "" {
		f, err := strconv.ParseFloat(rate, 64)
		if err != nil || f != math.Trunc(f) || f <= 0 || f > math.MaxInt64 {
			return m, cli.Usagef("-cpu-rate %q: want a whole number of instructions per second, e.g. 1e9 or 500000000", rate)
		}
		m.CPURate = int64(f)
	}
	if _, err := vm.ICountShift(m.CPURate); err != nil {
		return m, cli.Usagef("-cpu-rate: %v", err)
	}
	return m, nil
}

// checkWritable creates dir and checks that a file can be written into it.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".bigapp-*")
	if err != nil {
		return fmt.Errorf("not writable: %w", err)
	}
	f.Close()
	return os.Remove(f.Name())
}
