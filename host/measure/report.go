package measure

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm"
)

// Report is a measurement: every boot of every layout.
type Report struct {
	Storage vm.Storage
	Accel   string  // the accelerator the boots ran on
	Machine Machine // the clock
	Layouts []appliance.Layout
	Runs    map[appliance.Layout][]*Boot          // in the order they ran: Runs[l][i] is run i+1
	Images  map[appliance.Layout]*appliance.Image // as built, in Run's work directory
	// Profiles are the profiled boots (Options.Profile); nil: none.
	Profiles map[appliance.Layout]*Profile
}

// Spans are what the ratios compare: power-on to the first answer, and the
// kernel's handover to it (what init and the services cost).
const (
	SpanPowerOn = "power_on_to_service"
	SpanInit    = "init_to_service"
)

// Output is the JSON object nvboot measure -json prints.
type Output struct {
	Bench   string             `json:"bench"`
	Ratios  map[string]float64 `json:"ratios"`
	Results []benchjson.Result `json:"results"`
	Env     map[string]string  `json:"env"`
	// Profile is each layout's profiled boot (nvboot measure -profile),
	// by layout; absent without one.
	Profile map[string]ProfileOutput `json:"profile,omitempty"`
}

// values are the times of stage (or span) over the runs of l, in ms; a run
// without that stage is left out.
func (r *Report) values(l appliance.Layout, what string) []float64 {
	var v []float64
	for _, b := range r.Runs[l] {
		if d, ok := span(b, what); ok {
			v = append(v, ms(d))
		}
	}
	return v
}

// span is a stage's time since power-on, or one of the spans.
func span(b *Boot, what string) (time.Duration, bool) {
	switch what {
	case SpanPowerOn:
		d, ok := b.Stages[StageService]
		return d, ok
	case SpanInit:
		start, ok := b.Stages[StageHandover]
		if !ok {
			return 0, false
		}
		return b.Stages[StageService] - start, true
	}
	d, ok := b.Stages[what]
	return d, ok
}

// stats sums up a figure's runs in ms, rounded to 0.1 ms.
func stats(name string, v []float64) benchjson.Result {
	r := benchjson.Stats(name, "ms", v)
	r.Median, r.Min, r.Max = round(r.Median, 1), round(r.Min, 1), round(r.Max, 1)
	return r
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func ratioName(l appliance.Layout) string { return strings.ReplaceAll(string(l), "-", "") }

func (r *Report) median(l appliance.Layout, what string) (float64, bool) {
	v := r.values(l, what)
	if len(v) == 0 {
		return 0, false
	}
	return stats("", v).Median, true
}

// RatioSpread names the reproducibility figure: over every stage of every
// layout, the largest (max - min) / median of its runs.
const RatioSpread = "spread_max"

// Spread is RatioSpread, with the stage it came from ("layout.stage").
// Stages at less than a millisecond (the modeled load on unthrottled
// storage, 0) are left out: their spread is noise around nothing.
func (r *Report) Spread() (float64, string) {
	worst, where := 0.0, ""
	for _, l := range r.Layouts {
		if len(r.Runs[l]) < 2 {
			continue
		}
		for _, st := range Stages {
			v := r.values(l, st)
			if len(v) < 2 {
				continue
			}
			s := benchjson.Stats("", "ms", v)
			if s.Median < 1 {
				continue
			}
			if f := (s.Max - s.Min) / s.Median; f > worst || where == "" {
				worst, where = f, string(l)+"."+st
			}
		}
	}
	return worst, where
}

// Ratios compare off2f with every other layout measured, for both spans
// ("<span>.off2f_vs_<layout>", the layout's dash dropped), and give the
// spread of the runs (RatioSpread).
func (r *Report) Ratios() map[string]float64 {
	out := map[string]float64{}
	if sp, where := r.Spread(); where != "" {
		out[RatioSpread] = round(sp, 4)
	}
	for _, base := range r.Layouts {
		if base == appliance.OFF2F {
			continue
		}
		for _, sp := range []string{SpanPowerOn, SpanInit} {
			a, ok1 := r.median(appliance.OFF2F, sp)
			b, ok2 := r.median(base, sp)
			if ok1 && ok2 && b > 0 {
				out[fmt.Sprintf("%s.off2f_vs_%s", sp, ratioName(base))] = round(a/b, 3)
			}
		}
	}
	return out
}

// Results are every stage and span of every layout ("<layout>.<stage>"),
// in ms since power-on: median, min and max of the runs.
func (r *Report) Results() []benchjson.Result {
	var out []benchjson.Result
	for _, l := range r.Layouts {
		for _, st := range append(append([]string{}, Stages...), SpanPowerOn, SpanInit) {
			if v := r.values(l, st); len(v) > 0 {
				out = append(out, stats(string(l)+"."+st, v))
			}
		}
	}
	return out
}

// Output is the report as nvboot measure -json prints it.
func (r *Report) Output() Output {
	return Output{Bench: "measure", Ratios: r.Ratios(), Results: r.Results(),
		Env: r.Env(), Profile: r.profileOutput()}
}

// Env describes how the boots ran: storage, accelerator and clock.
func (r *Report) Env() map[string]string {
	e := map[string]string{"storage": r.Storage.About, "accel": r.Accel, "clock": r.Machine.Clock, "pmem": r.Machine.PmemAs}
	if r.Machine.MemMiB != 0 {
		e["mem_mib"] = strconv.Itoa(r.Machine.MemMiB)
	}
	if r.Machine.Append != "" {
		e["append"] = r.Machine.Append
	}
	if o := r.Machine.BootOptions(r.Storage); appliance.StorageInGuest(o) {
		e["disk_model"] = fmt.Sprintf("io.max in the guest, a %d ms window", contract.DiskLimitSlice)
		if o.DiskAsPmem {
			e["disk_model"] += ", the disk read from pmem (no host I/O on the guest's clock)"
		}
	}
	switch {
	case r.arm64():
		// The virt board's pmem is its device tree's regions, whatever
		// -pmem said (e820 stands for them), and it has no ACPI to turn off.
		e["arch"], e["pmem"], e["acpi"] = "arm64", "device-tree pmem-region nodes", "none (the device tree describes the board)"
	case r.Machine.Board == vm.BoardMicrovm:
		// Its pmem needs ACPI's PCIe host bridge (vm.BoardMicrovm).
		e["board"], e["acpi"] = vm.BoardMicrovm, "hardware-reduced"
	case r.Machine.PmemAs == vm.PmemE820 || r.Machine.PmemAs == vm.PmemVirtio:
		e["acpi"] = "off"
	}
	if r.Machine.Clock == vm.ClockDevice {
		e["cpu_rate"] = strconv.FormatInt(r.Machine.CPURate, 10)
	}
	return e
}

// arm64 says whether the boots ran on the arm64 board (the images'
// target: measure builds every layout for one).
func (r *Report) arm64() bool {
	if len(r.Layouts) == 0 || r.Images[r.Layouts[0]] == nil {
		return false
	}
	return r.Images[r.Layouts[0]].TargetOrDefault() == config.TargetVirt
}

// WriteTable prints one row per stage, a column per layout, then the
// ratios.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "nvboot measure: %s; %s; ms since power-on, median (min-max) of %d cold boots\n\n",
		r.Storage.About, r.Machine.String(r.Accel), len(r.Runs[r.Layouts[0]]))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"stage"}
	for _, l := range r.Layouts {
		head = append(head, string(l))
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, st := range append(append([]string{}, Stages...), SpanInit) {
		row := []string{st}
		if st == SpanInit {
			row[0] = "init→service"
		}
		for _, l := range r.Layouts {
			v := r.values(l, st)
			if len(v) == 0 {
				row = append(row, "-")
				continue
			}
			s := stats("", v)
			row = append(row, fmt.Sprintf("%.0f (%.0f-%.0f)", s.Median, s.Min, s.Max))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range r.Layouts {
		ready, ok1 := r.median(l, StageReady)
		svc, ok2 := r.median(l, StageService)
		if ok1 && ok2 && ready > svc {
			fmt.Fprintf(w, "%s: ready follows service by %.1f ms: the service answered the guest's first request before nvinit's readiness check saw it (nvinit checks WaitFor every %v, the first answer every %v)\n",
				l, ready-svc, contract.ReadinessPoll, contract.AnswerPoll)
		}
	}
	rat := r.Ratios()
	fmt.Fprintln(w)
	for _, k := range slices.Sorted(maps.Keys(rat)) {
		fmt.Fprintf(w, "%-42s %.3f", k, rat[k])
		if k == RatioSpread {
			_, where := r.Spread()
			fmt.Fprintf(w, "   (%s)", where)
		}
		fmt.Fprintln(w)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
