package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/nvboot/nvboot/bench/exec/plan"
	"github.com/nvboot/nvboot/format/benchjson"
)

// report turns the records of every place into results and ratios.
type report struct {
	Progs  *programs
	Places []*place
}

// result is one raw figure (docs/DEVICE-CLOCK.md#measuring-method).
type result = benchjson.Result

// output is the -json object. Beyond bench, ratios and results it carries what
// the reader needs to trust them: each layout's program output (the same in
// every layout, checked) and the environment.
type output struct {
	Bench   string             `json:"bench"`
	Ratios  map[string]float64 `json:"ratios"`
	Results []result           `json:"results"`
	// Outputs: "<place>/<group>" -> layout -> "exit 0: <stdout>".
	Outputs map[string]map[string]string `json:"outputs"`
	Env     map[string]string            `json:"env"`
}

// metric is one figure taken from every timed run.
type metric struct {
	name, unit string
	get        func(plan.Record) float64
	hostOnly   bool
}

var metrics = []metric{
	{"time", "ms", func(r plan.Record) float64 { return float64(r.NS) / 1e6 }, false},
	{"minflt", "faults", func(r plan.Record) float64 { return float64(r.MinFlt) }, false},
	{"majflt", "faults", func(r plan.Record) float64 { return float64(r.MajFlt) }, false},
	// The child's own reads (task I/O accounting, rusage ru_inblock): exact even
	// with other work on the machine. The guest kernel has no task I/O accounting.
	{"read", "KiB", func(r plan.Record) float64 { return float64(r.InBlock) / 2 }, true},
	// The storage device's sectors-read counter over the run: the whole device,
	// so on a shared host it includes other processes' reads.
	{"dev_read", "KiB", func(r plan.Record) float64 { return float64(r.DevSectors) / 2 }, false},
}

// runs returns the timed records of one group and layout at a place.
func (p *place) runs(group, layout string) []plan.Record {
	var rs []plan.Record
	for _, r := range p.Records {
		if r.Type == plan.TypeRun && r.Group == group && r.Layout == layout {
			rs = append(rs, r)
		}
	}
	return rs
}

var stats = benchjson.Stats

func (rep *report) results() []result {
	var out []result
	for _, p := range rep.Places {
		for _, g := range p.Plan.Groups {
			for _, l := range p.Layouts {
				rs := p.runs(g.Name, l)
				if len(rs) == 0 {
					continue
				}
				for _, m := range metrics {
					if m.hostOnly && p.Name != "host" {
						continue
					}
					if m.name == "dev_read" && rs[0].DevSectors < 0 {
						continue
					}
					vs := make([]float64, len(rs))
					for i, r := range rs {
						vs[i] = m.get(r)
					}
					out = append(out, stats(p.Name+"/"+g.Name+"/"+l+"/"+m.name, m.unit, vs))
				}
			}
		}
	}
	return out
}

// medianTime is the median start time in ms of a group and layout over the
// given places (pooled), and whether there was any run.
func medianTime(places []*place, group, layout string) (float64, bool) {
	var vs []float64
	for _, p := range places {
		for _, r := range p.runs(group, layout) {
			vs = append(vs, float64(r.NS)/1e6)
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	return stats("", "", vs).Median, true
}

// ratios names follow the issue: <prog>_<cold|warm>_off2f_vs_<baseline> with
// "host_" in front for the host and "_<profile>" behind for a guest; warm
// figures of all guests pooled carry neither (storage does not matter warm).
// tiny's are differences in µs (…_minus_elf_us), not ratios.
func (rep *report) ratios() map[string]float64 {
	out := map[string]float64{}
	add := func(name string, places []*place, group, num, den string, diffUS bool) {
		a, ok1 := medianTime(places, group, num)
		b, ok2 := medianTime(places, group, den)
		if !ok1 || !ok2 || b == 0 {
			return
		}
		if diffUS {
			out[name] = round((a-b)*1000, 1)
		} else {
			out[name] = round(a/b, 3)
		}
	}
	var guests []*place
	for _, p := range rep.Places {
		ps := []*place{p}
		if p.Name == "host" {
			o := layoutOFF2FTmpfs
			add("host_big_cold_off2f_vs_elf", ps, "big/cold", o, layoutELF, false)
			add("host_big_warm_off2f_vs_elf", ps, "big/warm", o, layoutELF, false)
			add("host_mid_cold_off2f_vs_elf", ps, "mid/cold", o, layoutELF, false)
			add("host_mid_warm_off2f_vs_elf", ps, "mid/warm", o, layoutELF, false)
			add("host_tiny_off2f_minus_elf_us", ps, "tiny/warm", o, layoutELF, true)
			add("host_tiny_cold_off2f_minus_elf_us", ps, "tiny/cold", o, layoutELF, true)
			add("host_make_off2f_vs_elf", ps, "make/cold", o, layoutELF, false)
			add("host_big_cold_off2f_vs_tmpfs", ps, "big/cold", o, layoutTmpfs, false)
			add("host_big_warm_off2f_vs_tmpfs", ps, "big/warm", o, layoutTmpfs, false)
			// The text store on 2 MiB tmpfs pages, DAX's stand-in on the host.
			hg := layoutOFF2FHuge
			add("host_big_cold_off2f_hugetmpfs_vs_elf", ps, "big/cold", hg, layoutELF, false)
			add("host_big_warm_off2f_hugetmpfs_vs_elf", ps, "big/warm", hg, layoutELF, false)
			add("host_mid_warm_off2f_hugetmpfs_vs_elf", ps, "mid/warm", hg, layoutELF, false)
			add("host_tiny_off2f_hugetmpfs_minus_elf_us", ps, "tiny/warm", hg, layoutELF, true)
			add("host_make_off2f_hugetmpfs_vs_elf", ps, "make/cold", hg, layoutELF, false)
			add("host_big_cold_off2f_hugetmpfs_vs_hugetmpfs", ps, "big/cold", hg, layoutHugeTmpfs, false)
			continue
		}
		guests = append(guests, p)
		s := "_" + strings.TrimPrefix(p.Name, "vm-")
		o := layoutOFF2F
		add("big_cold_off2f_vs_elf"+s, ps, "big/cold", o, layoutELF, false)
		add("mid_cold_off2f_vs_elf"+s, ps, "mid/cold", o, layoutELF, false)
		add("big_cold_off2f_vs_daxelf"+s, ps, "big/cold", o, layoutDAXELF, false)
		add("mid_cold_off2f_vs_daxelf"+s, ps, "mid/cold", o, layoutDAXELF, false)
		add("big_cold_daxelf_vs_elf"+s, ps, "big/cold", layoutDAXELF, layoutELF, false)
		add("big_warm_off2f_vs_elf"+s, ps, "big/warm", o, layoutELF, false)
		add("tiny_off2f_minus_elf_us"+s, ps, "tiny/warm", o, layoutELF, true)
		add("tiny_cold_off2f_minus_elf_us"+s, ps, "tiny/cold", o, layoutELF, true)
		add("make_off2f_vs_elf"+s, ps, "make/cold", o, layoutELF, false)
	}
	if len(guests) > 0 {
		add("big_warm_off2f_vs_elf", guests, "big/warm", layoutOFF2F, layoutELF, false)
		add("mid_warm_off2f_vs_elf", guests, "mid/warm", layoutOFF2F, layoutELF, false)
		add("big_warm_off2f_vs_daxelf", guests, "big/warm", layoutOFF2F, layoutDAXELF, false)
		add("tiny_off2f_minus_elf_us", guests, "tiny/warm", layoutOFF2F, layoutELF, true)
	}
	return out
}

// target is a goal from the issue; the report says whether it was met.
type target struct {
	Ratio string
	Max   float64
	Why   string
}

var targets = []target{
	{"big_cold_off2f_vs_elf_sd", 0.3, "big-text cold start, SD card"},
	{"big_cold_off2f_vs_elf_nvme", 0.5, "big-text cold start, NVMe"},
	{"big_warm_off2f_vs_elf", 1.05, "warm start, guest"},
	{"host_big_warm_off2f_vs_elf", 1.05, "warm start, host"},
	{"tiny_off2f_minus_elf_us", 100, "tiny program overhead (µs), guest"},
	{"host_tiny_off2f_minus_elf_us", 100, "tiny program overhead (µs), host"},
	{"big_cold_off2f_vs_daxelf_sd", 1.0, "not slower than the whole ELF on DAX"},
}

func round(v float64, digits int) float64 {
	p := 1.0
	for i := 0; i < digits; i++ {
		p *= 10
	}
	if v < 0 {
		return -float64(int64(-v*p+0.5)) / p
	}
	return float64(int64(v*p+0.5)) / p
}

// outputs maps "<place>/<group>" to each layout's observed outcome.
func (rep *report) outputs() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, p := range rep.Places {
		for _, r := range p.Records {
			if r.Type != plan.TypeCheck {
				continue
			}
			k := p.Name + "/" + r.Group
			if out[k] == nil {
				out[k] = map[string]string{}
			}
			s := r.Status + ": " + r.Stdout
			if r.Stderr != "" {
				s += " [stderr] " + r.Stderr
			}
			out[k][r.Layout] = s
		}
	}
	return out
}

// checkOutputs fails when layouts of a group behaved differently: then the
// timings compare different work.
func (rep *report) checkOutputs() error {
	var bad []string
	for k, byLayout := range rep.outputs() {
		var first, firstL string
		for l, o := range byLayout {
			if first == "" {
				first, firstL = o, l
				continue
			}
			if o != first {
				bad = append(bad, fmt.Sprintf("%s: %s gave %q, %s gave %q", k, firstL, first, l, o))
			}
		}
		if !strings.HasPrefix(first, "exit 0:") {
			bad = append(bad, fmt.Sprintf("%s: %q", k, first))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("programs did not behave alike in every layout:\n  %s", strings.Join(bad, "\n  "))
	}
	return nil
}

func (rep *report) env() map[string]string {
	e := map[string]string{}
	for _, name := range programNames {
		e["text_rodata_mib_"+name] = fmt.Sprintf("%.2f", float64(rep.Progs.Text[name])/(1<<20))
	}
	for _, p := range rep.Places {
		e["storage_"+p.Name] = p.Storage
		e["layouts_"+p.Name] = strings.Join(p.Layouts, ",")
	}
	return e
}

func (rep *report) writeJSON(w io.Writer) error {
	o := output{Bench: "exec", Ratios: rep.ratios(), Results: rep.results(), Outputs: rep.outputs(), Env: rep.env()}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(o)
}

func (rep *report) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, p := range rep.Places {
		fmt.Fprintf(w, "\n%s — storage: %s\n", p.Name, p.Storage)
		fmt.Fprintf(tw, "group\tlayout\tmedian ms\tmin ms\tmax ms\tminflt\tmajflt\tread KiB\tdev KiB\truns\t\n")
		for _, g := range p.Plan.Groups {
			for _, l := range p.Layouts {
				rs := p.runs(g.Name, l)
				if len(rs) == 0 {
					continue
				}
				col := func(m metric) result {
					vs := make([]float64, len(rs))
					for i, r := range rs {
						vs[i] = m.get(r)
					}
					return stats("", "", vs)
				}
				t, minf, majf, rd, dev := col(metrics[0]), col(metrics[1]), col(metrics[2]), col(metrics[3]), col(metrics[4])
				devS := fmt.Sprintf("%.0f", dev.Median)
				if rs[0].DevSectors < 0 {
					devS = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f\t%.3f\t%.0f\t%.0f\t%.0f\t%s\t%d\t\n",
					g.Name, l, t.Median, t.Min, t.Max, minf.Median, majf.Median, rd.Median, devS, t.Runs)
			}
		}
		tw.Flush()
	}
	ratios := rep.ratios()
	var keys []string
	for k := range ratios {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "\nratios (median time of the first layout over the second; _us: difference in µs)\n")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%g\t\n", k, ratios[k])
	}
	tw.Flush()
	fmt.Fprintf(w, "\ntargets\n")
	for _, t := range targets {
		v, ok := ratios[t.Ratio]
		state := "not measured"
		if ok {
			state = "met"
			if v > t.Max {
				state = "MISSED"
			}
		}
		fmt.Fprintf(tw, "%s\t≤ %g\t%s\t%s\t\n", t.Ratio, t.Max, state, t.Why)
	}
	return tw.Flush()
}
