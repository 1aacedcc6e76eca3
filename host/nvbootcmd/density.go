package nvbootcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/measure"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/cli"
)

// densityFlags are nvboot measure's flags a density run reads.
type densityFlags struct {
	counts, starts, layouts, storage, cfgPath, work, charts, kernel, arch, src string
	asJSON                                                                     bool
	tcgCache                                                                   int
}

// densityLayouts are the layouts -density compares unless -layouts says.
const densityLayouts = "off2f,elf,dax-elf"

// maxDensity bounds one N: each guest is a QEMU of its own.
const maxDensity = 64

// densityCmd is nvboot measure -density (measureDescription says what it
// does).
func densityCmd(ctx context.Context, c *cli.Context, fs *flag.FlagSet, f densityFlags, mf *machineFlags) error {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	for _, name := range []string{"runs", "profile"} {
		if set[name] {
			return cli.Usagef("-%s with -density: a density run starts each N once, and profiles no boot", name)
		}
	}
	if set["pmem"] && *mf.pmem != vm.PmemNVDIMM {
		return cli.Usagef("-pmem %s with -density: the guests share the text store read-only, which only an NVDIMM can tell a guest (leave -pmem out)", *mf.pmem)
	}
	switch {
	case !set["clock"]:
		*mf.clock = vm.ClockWall
	case *mf.clock != vm.ClockWall:
		return cli.Usagef("-clock %s with -density: it runs on the wall clock (a guest's device clock is its own, the same for any N: what the host's load does is the question)", *mf.clock)
	}
	if f.tcgCache < 0 {
		return cli.Usagef("-tcg-cache %d: want a size in MiB, or 0 for %d", f.tcgCache, appliance.SharedTCGCacheMiB)
	}
	counts, err := parseCounts(f.counts)
	if err != nil {
		return err
	}
	var starts []string
	for _, s := range strings.Split(f.starts, ",") {
		s = strings.TrimSpace(s)
		if s != measure.StartStaggered && s != measure.StartBurst {
			return cli.Usagef("-start %q: want %s, %s or both, comma-separated", s, measure.StartStaggered, measure.StartBurst)
		}
		starts = append(starts, s)
	}
	prof, err := vm.Profile(f.storage)
	if err != nil {
		return cli.Usagef("-storage: %v", err)
	}
	mach, err := mf.resolve()
	if err != nil {
		return err
	}
	layouts := f.layouts
	if !set["layouts"] {
		layouts = densityLayouts
	}
	var ls []appliance.Layout
	for _, s := range strings.Split(layouts, ",") {
		l, err := appliance.ParseLayout(strings.TrimSpace(s))
		if err != nil {
			return cli.Usagef("-layouts: %v", err)
		}
		ls = append(ls, l)
	}
	if f.charts != "" {
		if err := chartDir(f.charts); err != nil {
			return fmt.Errorf("-charts %s: %w", f.charts, err)
		}
	}
	log := cli.NewProgress(c.Stderr)
	in, err := loadInputs(ctx, f.cfgPath, f.src, f.kernel, f.arch, true, c.Stderr)
	if err != nil {
		return err
	}
	rep, err := measure.RunDensity(ctx, measure.DensityOptions{Image: in.options("", "", nil), Layouts: ls, Counts: counts, Starts: starts,
		Storage: prof, Machine: mach, Work: f.work, Logf: log.Printf, TCGCacheMiB: f.tcgCache})
	if err != nil {
		return err
	}
	return emitDensity(c.Stdout, rep, f.asJSON, f.charts, densityChartName(f.cfgPath), log)
}

// densityChartName is the chart's file: measure-density.svg for the demo,
// measure-density-NAME.svg for a config NAME.json, so that the charts of
// two configs can share a directory.
func densityChartName(cfgPath string) string {
	if cfgPath == "" {
		return "measure-density.svg"
	}
	return "measure-density-" + strings.TrimSuffix(filepath.Base(cfgPath), filepath.Ext(cfgPath)) + ".svg"
}

// parseCounts reads -density: whole numbers of guests, each once.
func parseCounts(s string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxDensity {
			return nil, cli.Usagef("-density %q: %q is not a number of guests from 1 to %d", s, f, maxDensity)
		}
		if seen[n] {
			return nil, cli.Usagef("-density %q: %d twice", s, n)
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}

// emitDensity prints the result (JSON or the table) and writes the chart
// into charts ("": none) as name.
func emitDensity(w io.Writer, r *measure.DensityReport, asJSON bool, charts, name string, log *cli.Progress) error {
	var err error
	if asJSON {
		err = cli.JSON(w, r.Output())
	} else {
		err = r.WriteTable(w)
	}
	if err != nil || charts == "" {
		return err
	}
	p := filepath.Join(charts, name)
	if err := os.WriteFile(p, r.Chart("nvboot measure -density: host memory per appliance"), 0o644); err != nil {
		return fmt.Errorf("-charts %s: %w (the results are printed above)", charts, err)
	}
	log.Printf("density chart: %s", p)
	return nil
}
