package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/measure"
	"github.com/nvboot/nvboot/host/vm"
)

// The spans the chart and the ratios are about, as nvboot measure names them.
const (
	spanPowerOn = "power_on_to_service"
	spanInit    = "init_to_service"
)

var spans = []string{spanPowerOn, spanInit}

// report is every size measured.
type report struct {
	Layouts []string // off2f first
	Runs    int
	Storage vm.Storage
	Scale   int // the time-scaled device's factor; 0: not run
	Sizes   []sizeResult
}

// sizeResult is one size: its config, its text and its measure output.
type sizeResult struct {
	size
	Text     texts
	Measure  measure.Output          // the size's figures, as nvboot measure -json prints them
	Report   *measure.Report         // its boots, for the boot chart
	Bootstat map[string]*diag        // by layout; nil: not run
	Scaled   map[string][]scaledBoot // by layout; nil: not run
}

// output is the -json object, the shape every nvboot benchmark prints.
type output struct {
	Bench   string             `json:"bench"`
	Env     map[string]string  `json:"env"`
	Ratios  map[string]float64 `json:"ratios"`
	Results []benchjson.Result `json:"results"`
}

func mib(b uint64) float64 { return round(float64(b)/(1<<20), 2) }

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// one is a figure measured once (a size, not a time).
func one(name, unit string, v float64) benchjson.Result {
	return benchjson.Result{Name: name, Unit: unit, Median: v, Min: v, Max: v, Runs: 1}
}

func (r *report) output() output {
	o := output{Bench: "bigapp", Env: map[string]string{}, Ratios: map[string]float64{}}
	var sizes []string
	for _, s := range r.Sizes {
		sizes = append(sizes, s.Name+"="+s.Config)
		// The environment is the same for every size (the same flags);
		// measure's own keys are kept as it names them.
		for k, v := range s.Measure.Env {
			o.Env[k] = v
		}
		for k, v := range s.Measure.Ratios {
			o.Ratios[s.Name+"."+k] = v
		}
		o.Results = append(o.Results, one(s.Name+".text_services", "MiB", mib(s.Text.Total)),
			one(s.Name+".text_nvinit", "MiB", mib(s.Text.Nvinit)))
		for _, name := range sortedKeys(s.Text.Services) {
			o.Results = append(o.Results, one(s.Name+".text."+name, "MiB", mib(s.Text.Services[name])))
		}
		for _, res := range s.Measure.Results {
			res.Name = s.Name + "." + res.Name
			o.Results = append(o.Results, res)
		}
		o.Results = append(o.Results, bootstatResults(s.Name, r.Layouts, s.Bootstat, s.Text.Services, r.Storage)...)
		res, ratios := scaledResults(s.Name, r.Layouts, s.Scaled)
		o.Results = append(o.Results, res...)
		for k, v := range ratios {
			o.Ratios[k] = v
		}
	}
	o.Env["sizes"] = strings.Join(sizes, ",")
	o.Env["layouts"] = strings.Join(r.Layouts, ",")
	o.Env["runs"] = fmt.Sprint(r.Runs)
	if r.Scale > 0 {
		o.Env["scale"] = fmt.Sprint(r.Scale)
	}
	o.Env["text"] = "read-only PT_LOAD bytes of the services started at boot (text_services; nvinit's apart)"
	return o
}

func sortedKeys[V any](m map[string]V) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// writeTable prints, per size, each layout's medians of the two spans and
// then the ratios.
func (r *report) writeTable(w io.Writer) error {
	if len(r.Sizes) == 0 {
		return nil
	}
	env := r.Sizes[0].Measure.Env
	fmt.Fprintf(w, "bench/bigapp: storage %s; clock %s (cpu rate %s); ms, median (min-max) of %d cold boots\n\n",
		env["storage"], env["clock"], cmp.Or(env["cpu_rate"], "-"), r.Runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "size\tservices' text MiB\tlayout\tpower_on_to_service\tinit_to_service\t")
	for _, s := range r.Sizes {
		for i, l := range r.Layouts {
			name, txt := "", ""
			if i == 0 {
				name, txt = s.Name, fmt.Sprintf("%.1f (%s)", mib(s.Text.Total), serviceList(s.Text))
			}
			row := []string{name, txt, l}
			for _, sp := range spans {
				if v, ok := result(s.Measure, l+"."+sp); ok {
					row = append(row, fmt.Sprintf("%.0f (%.0f-%.0f)", v.Median, v.Min, v.Max))
				} else {
					row = append(row, "-")
				}
			}
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeBootstat(w); err != nil {
		return err
	}
	if err := r.writeScaled(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, s := range r.Sizes {
		for _, k := range sortedKeys(s.Measure.Ratios) {
			fmt.Fprintf(w, "%-56s %.3f\n", s.Name+"."+k, s.Measure.Ratios[k])
		}
		_, ratios := scaledResults(s.Name, r.Layouts, s.Scaled)
		for _, k := range sortedKeys(ratios) {
			fmt.Fprintf(w, "%-56s %.3f\n", k, ratios[k])
		}
	}
	return nil
}

func serviceList(t texts) string {
	var parts []string
	for _, n := range sortedKeys(t.Services) {
		parts = append(parts, fmt.Sprintf("%s %.1f", n, mib(t.Services[n])))
	}
	return strings.Join(parts, " + ")
}

// writeBootstat prints what the diagnostic boots saw by the first answer.
func (r *report) writeBootstat(w io.Writer) error {
	var rows [][]string
	for _, s := range r.Sizes {
		for _, l := range r.Layouts {
			d := s.Bootstat[l]
			if d == nil {
				continue
			}
			after := d.ByAnswer.Bytes - d.First.Bytes
			row := []string{s.Name, l, fmt.Sprintf("%.1f MiB in %d", mib(d.ByAnswer.Bytes), d.ByAnswer.Reads),
				fmt.Sprintf("%.1f MiB, %.0f ms", mib(after), ms(diskModel(r.Storage, d.ByAnswer.Reads-d.First.Reads, after))),
				fmt.Sprintf("%.0f / %.0f", ms(d.Answered-d.Start), ms(d.HostStartToAnswer))}
			var per []string
			for _, p := range d.Stat.Procs {
				if _, ok := s.Text.Services[p.Name]; ok {
					per = append(per, fmt.Sprintf("%s %.1f / %.1f / %d", p.Name, mib(p.FileCached), mib(p.TextRSS), p.MajFlt))
				}
			}
			rows = append(rows, append(row, strings.Join(per, ", ")))
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nBy the first answer (one diagnostic boot per layout, with bench/bigapp/cmd/bootstat):\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "size\tlayout\tread from the disk\tof it after the start: MiB, model time\tstart→answer ms guest / host\tper service: file read MiB / text mapped MiB / major faults\t")
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

// writeScaled prints the time-scaled device's medians.
func (r *report) writeScaled(w io.Writer) error {
	if r.Scale == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nThe time-scaled device (-scale %d: core and disk %d times slower, guest time held to the host's; ms divided by %d):\n\n", r.Scale, r.Scale, r.Scale)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "size\tlayout\tpower_on_to_service\tinit_to_service\tguest late by up to (host s)\t")
	for _, s := range r.Sizes {
		res, _ := scaledResults(s.Name, r.Layouts, s.Scaled)
		got := map[string]benchjson.Result{}
		for _, x := range res {
			got[x.Name] = x
		}
		for _, l := range r.Layouts {
			p := s.Name + ".scaled." + l + "."
			on, ok := got[p+spanPowerOn]
			if !ok {
				continue
			}
			in, late := got[p+spanInit], got[p+"late_max"]
			fmt.Fprintf(tw, "%s\t%s\t%.0f (%.0f-%.0f)\t%.0f (%.0f-%.0f)\t%.0f\t\n", s.Name, l, on.Median, on.Min, on.Max, in.Median, in.Min, in.Max, late.Max)
		}
	}
	return tw.Flush()
}
