package nvbootcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/measure"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/cli"
)

const measureDescription = `Builds the image once per layout, boots each once untimed (the first boot
of a device: the service creates its state) and powers it off cleanly, then
cold-boots each N times, interleaved (off2f, elf, ... then again, each round
starting one layout further on), on the same storage model, every boot from
a fresh copy of that pmem.
Each boot is timed from power-on to the first HTTP answer of the first
service with a ForwardPort, with the stages between taken from nvinit's
serial markers:

  loaded    the kernel brought into memory by the firmware, modeled since
            QEMU loads it from a host file: copied from the kernel region on
            pmem at 1 GiB/s when the region holds the image's kernel, else
            the bzImage (and any initramfs) read at the storage profile's
            bandwidth
  kernel    the firmware hands over to the kernel (device clock: measured
            by booting a copy of the kernel whose first instruction reports
            the guest's clock; wall clock: estimated from the marks)
  handover  the kernel runs init
  init      nvinit's first instruction of main
  store     the text store is mounted (or the fallback chosen)
  state     the state filesystem is mounted
  ready     the service accepts connections (its WaitFor)
  service   the first request is answered (device clock: asked and timed
            by nvinit inside the guest, then confirmed from the host)

It prints a table (median, min, max of each stage) and the ratios of off2f
to every other layout measured, for power_on_to_service and init_to_service,
named "<span>.off2f_vs_<layout>" with the layout's dash dropped (e.g.
power_on_to_service.off2f_vs_elf, init_to_service.off2f_vs_daxelf), and
spread_max: over every stage of every layout, the largest (max - min) /
median of its runs. With -json one object instead:
{"bench":"measure","env":{...,"clock","cpu_rate"},"ratios":{...},"results":[...]}.
With -charts DIR it then writes boot charts (SVG) into DIR (created, and
checked to be writable, before anything is built or booted): one per layout,
measure-<layout>.svg, and with more than one layout measure.svg, every
layout in a lane group of its own. A chart draws one boot per layout, the
median by power-on to service, its stages in the order they happened.

With -profile each layout boots once more, with initcall_debug on its
command line (the console stays quiet: the kernel keeps the lines in its
log) and nvboot.profile=1, which has nvinit print, once the boot is
measured, that log and the steps it timed inside its stages (the store's
device, MANIFEST and mount, the disk model's cgroup, the network...).
The profile then says, per layout: the kernel's phases (firmware, setup,
initcalls, root mount and freed init memory), its longest initcalls and
driver probes, nvinit's marks and steps with the time between each, and
what the profile itself costs: that boot's handover and first answer
against the median of the measured boots (the log's lines cost
instructions, which the device clock counts). Initcalls are named from
the kernel's System.map when it lies beside the bzImage
(kernel-config/build.sh keeps it there). With -json the profile is the
object's "profile" key, by layout; with -charts the kernel's longest
initcalls are rows under its kernel → handover bar.

With -density N,... it measures instead what many appliances of one image
cost the host: for each layout (default off2f,elf,dax-elf) it builds the
image, boots it once to create its state, then for each N starts N guests
of it, each with the image's text store mapped read-only from one host file
(nvboot run -shared-text) and a copy of that state of its own, waits for
each one's first answer, and reads the host's memory: every QEMU's
proportional set size (/proc/PID/smaps_rollup) less its share of the shared
files' mappings, plus the page-cache pages of the files every guest uses
(the text store, the disk, the kernel: mincore), counted once, their cache
dropped before the first guest starts. -start says how the N start:
staggered (each once the one before has answered) and burst (all at once).
Each guest is one of run -shared-text: free page reporting on, its RAM in
4 KiB pages, under TCG a translation cache of -tcg-cache MiB (16). It prints per N the host
memory per appliance and the guests' times to their first answer, and the
ratios density_N.off2f_vs_<layout> (off2f's memory per appliance over the
layout's, from the staggered runs; density_N.burst.off2f_vs_<layout> from
the burst ones; density_N.no_tcg.* without the TCG caches, which a KVM host
does not have; density_N.guest.* the guests' RAM and the shared files
alone, without any QEMU's own memory); -json prints
{"bench":"measure-density","env","ratios","results"}, -charts DIR writes
measure-density.svg (measure-density-NAME.svg for -config NAME.json:
memory per appliance against N). It runs on the wall
clock (a guest's device clock is its own, the same for any N), its pmem as
NVDIMMs; the times under TCG with N guests on a few cores are a figure of
the host's load, not of a device. -runs and -profile are not for it.

` + clockHelp + `
Where KVM really works the wall clock on KVM is the default; elsewhere the
device clock.`

const measureExamples = `  nvboot measure -runs 5 -storage sd
  nvboot measure -layouts off2f,elf -runs 1 -profile        # where each millisecond goes
  nvboot measure -clock device -cpu-rate 5e8 -layouts off2f,elf -runs 3   # a 500-MIPS core
  nvboot measure -layouts off2f,elf -runs 3 -charts out/charts
  nvboot measure -layouts off2f,elf -runs 3 -json > measure.json
  nvboot measure -density 1,2,4,8,16 -charts out/charts     # host memory per appliance, N guests of one image
  nvboot measure -density 8 -start burst -config examples/big.json -json`

func measureCmd(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "nvboot measure", "nvboot measure [-layouts L,...] [-runs N] [-storage P] [-json]", measureDescription, measureExamples)
	layouts := fs.String("layouts", "off2f,elf,initramfs,dax-elf", "layouts to compare, comma-separated (off2f is compared with each other one)")
	runs := fs.Int("runs", 5, "cold boots per layout")
	storage := fs.String("storage", "sd", "disk speed model: "+strings.Join(vm.ProfileNames(), ", "))
	cfgPath := fs.String("config", "", "image config `file`; empty: the demo (kv)")
	work := fs.String("work", "", "keep the images and runs in this `directory`; empty: a temporary one, removed")
	charts := fs.String("charts", "", "write the boot charts (measure-<layout>.svg, measure.svg) into this `directory`; empty: none")
	kernel := fs.String("kernel", "", "kernel (the target's: an x86 bzImage, an arm64 Image); empty: $NVBOOT_KERNEL ($NVBOOT_KERNEL_ARM64 for arm64) or the cached kernel-config/ build")
	arch := fs.String("arch", "", "build for this GOARCH (amd64, arm64) or target (amd64-pc, arm64-virt), over the config's Environment GOARCH, as nvboot build -arch; empty: the config's")
	src := fs.String("src", "", "the nvboot checkout; empty: the current module")
	mf := addMachineFlags(fs, "")
	asJSON := fs.Bool("json", false, "print the result as one JSON object on stdout")
	profile := fs.Bool("profile", false, "after the measured boots, boot each layout once more with "+measure.ProfileCmdline+" and print where its time went")
	density := fs.String("density", "", "measure host memory per appliance instead: start `N,...` guests of each layout's image at once (e.g. 1,2,4,8,16), the text store shared")
	starts := fs.String("start", measure.StartStaggered+","+measure.StartBurst, "with -density: how the N guests start, comma-separated: staggered (each once the one before answered), burst (all at once)")
	tcgCache := fs.Int("tcg-cache", 0, fmt.Sprintf("with -density under TCG: each guest's translation cache in `MiB` (QEMU's tb-size); 0: %d", appliance.SharedTCGCacheMiB))
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected arguments %q", fs.Args())
	}
	if *density != "" {
		return densityCmd(ctx, c, fs, densityFlags{counts: *density, starts: *starts, layouts: *layouts, storage: *storage, cfgPath: *cfgPath,
			work: *work, charts: *charts, kernel: *kernel, arch: *arch, src: *src, asJSON: *asJSON, tcgCache: *tcgCache}, mf)
	}
	if *tcgCache != 0 {
		return cli.Usagef("-tcg-cache without -density: a boot's time on the device clock does not depend on it (it counts guest instructions), and on the wall clock a smaller cache is slower")
	}
	if *runs < 1 {
		return cli.Usagef("-runs %d: want at least 1", *runs)
	}
	prof, err := vm.Profile(*storage)
	if err != nil {
		return cli.Usagef("-storage: %v", err)
	}
	mach, err := mf.resolve()
	if err != nil {
		return err
	}
	var ls []appliance.Layout
	for _, s := range strings.Split(*layouts, ",") {
		l, err := appliance.ParseLayout(strings.TrimSpace(s))
		if err != nil {
			return cli.Usagef("-layouts: %v", err)
		}
		ls = append(ls, l)
	}
	// Before minutes of boots: a chart directory that cannot be written
	// fails now, not after the results are in.
	if *charts != "" {
		if err := chartDir(*charts); err != nil {
			return fmt.Errorf("-charts %s: %w", *charts, err)
		}
	}
	log := cli.NewProgress(c.Stderr)
	in, err := loadInputs(ctx, *cfgPath, *src, *kernel, *arch, true, c.Stderr)
	if err != nil {
		return err
	}
	dir := *work
	if dir != "" {
		// Absolute: the builds run go build and make in other directories.
		if dir, err = filepath.Abs(dir); err != nil {
			return fmt.Errorf("-work %s: %w", *work, err)
		}
	}
	rep, err := measure.Run(ctx, measure.Options{Image: in.options("", "", nil), Layouts: ls, Runs: *runs,
		Storage: prof, Machine: mach, Work: dir, Logf: log.Printf, Profile: *profile})
	if err != nil {
		return err
	}
	return emit(c.Stdout, rep, *asJSON, *charts, log)
}

// chartDir creates the -charts directory and checks that a file can be
// written into it.
func chartDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".nvboot-measure-*")
	if err != nil {
		return fmt.Errorf("not writable: %w", err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// emit prints the results (JSON or the table), then writes the boot charts
// into charts ("": none): measure-<layout>.svg per layout and, with more
// than one, measure.svg with them all. A chart that cannot be written loses
// no result.
func emit(w io.Writer, r *measure.Report, asJSON bool, charts string, log *cli.Progress) error {
	var err error
	if asJSON {
		err = cli.JSON(w, r.Output())
	} else if err = r.WriteTable(w); err == nil {
		err = r.WriteProfiles(w)
	}
	if err != nil || charts == "" {
		return err
	}
	type chart struct {
		file    string
		layouts []appliance.Layout
	}
	var cs []chart
	for _, l := range r.Layouts {
		cs = append(cs, chart{"measure-" + string(l) + ".svg", []appliance.Layout{l}})
	}
	if len(r.Layouts) > 1 {
		cs = append(cs, chart{"measure.svg", r.Layouts})
	}
	for _, c := range cs {
		p := filepath.Join(charts, c.file)
		if err := os.WriteFile(p, r.Chart("nvboot measure: boot chart", c.layouts...), 0o644); err != nil {
			return fmt.Errorf("-charts %s: %w (the results are printed above)", charts, err)
		}
		log.Printf("boot chart: %s", p)
	}
	return nil
}
