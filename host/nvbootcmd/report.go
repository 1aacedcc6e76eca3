package nvbootcmd

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nvboot/nvboot/device/contract"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/vm"
)

// report is a measure run: every boot of every layout.
type report struct {
	Storage vm.Storage
	Accel   string
	Machine machine // the clock
	Layouts []appliance.Layout
	Runs    map[appliance.Layout][]*bootResult
}

// Spans are what the ratios compare: power-on to the first answer, and the
// kernel's handover to it (what init and the services cost).
const (
	SpanPowerOn = "power_on_to_service"
	SpanInit    = "init_to_service"
)

type output struct {
	Bench   string             `json:"bench"`
	Ratios  map[string]float64 `json:"ratios"`
	Results []benchjson.Result `json:"results"`
	Env     map[string]string  `json:"env"`
}

// values are the times of stage (or span) over the runs of l, in ms; a run
// without that stage is left out.
func (r *report) values(l appliance.Layout, what string) []float64 {
	var v []float64
	for _, b := range r.Runs[l] {
		if d, ok := span(b, what); ok {
			v = append(v, ms(d))
		}
	}
	return v
}

// span is a stage's time since power-on, or one of the spans.
func span(b *bootResult, what string) (time.Duration, bool) {
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

func (r *report) median(l appliance.Layout, what string) (float64, bool) {
	v := r.values(l, what)
	if len(v) == 0 {
		return 0, false
	}
	return stats("", v).Median, true
}

// RatioSpread names the reproducibility figure: over every stage of every
// layout, the largest (max - min) / median of its runs.
const RatioSpread = "spread_max"

// spread is RatioSpread, with the stage it came from ("layout.stage").
// Stages at less than a millisecond (the modeled load on unthrottled
// storage, 0) are left out: their spread is noise around nothing.
func (r *report) spread() (float64, string) {
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

// ratios compare off2f with every other layout measured, for both spans,
// and give the spread of the runs.
func (r *report) ratios() map[string]float64 {
	out := map[string]float64{}
	if sp, where := r.spread(); where != "" {
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

func (r *report) results() []benchjson.Result {
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

func (r *report) output() output {
	return output{Bench: "measure", Ratios: r.ratios(), Results: r.results(),
		Env: r.env()}
}

// env describes how the boots ran: storage, accelerator and clock.
func (r *report) env() map[string]string {
	e := map[string]string{"storage": r.Storage.About, "accel": r.Accel, "clock": r.Machine.Clock, "pmem": r.Machine.PmemAs}
	if r.Machine.MemMiB != 0 {
		e["mem_mib"] = strconv.Itoa(r.Machine.MemMiB)
	}
	if r.Machine.Append != "" {
		e["append"] = r.Machine.Append
	}
	if _, ok := appliance.GuestDiskLimit(r.Machine.boot(r.Storage)); ok {
		e["disk_model"] = fmt.Sprintf("io.max in the guest, a %d ms window (and QEMU's throttle)", contract.DiskLimitSlice)
	}
	if r.Machine.PmemAs == vm.PmemE820 {
		e["acpi"] = "off"
	}
	if r.Machine.Clock == vm.ClockDevice {
		e["cpu_rate"] = strconv.FormatInt(r.Machine.CPURate, 10)
	}
	return e
}

// writeTable prints one row per stage, a column group per layout.
func (r *report) writeTable(w io.Writer) error {
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
	rat := r.ratios()
	keys := make([]string, 0, len(rat))
	for k := range rat {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(w)
	for _, k := range keys {
		fmt.Fprintf(w, "%-42s %.3f", k, rat[k])
		if k == RatioSpread {
			_, where := r.spread()
			fmt.Fprintf(w, "   (%s)", where)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// chart draws the median boot of layout l as horizontal bars, one per stage
// interval, on a millisecond axis.
func (r *report) chart(l appliance.Layout) []byte {
	type bar struct {
		name       string
		start, end float64
	}
	med := map[string]float64{}
	for _, st := range Stages {
		if v, ok := r.median(l, st); ok {
			med[st] = v
		}
	}
	var bars []bar
	prev, prevName := 0.0, "power-on"
	for _, st := range Stages {
		t, ok := med[st]
		if !ok {
			continue
		}
		bars = append(bars, bar{prevName + " → " + st, prev, t})
		prev, prevName = t, st
	}
	total := math.Max(prev, 1)
	const width, left, rowH = 900.0, 190.0, 26.0
	scale := (width - left - 20) / total
	var b bytes.Buffer
	h := 60 + rowH*float64(len(bars)+1)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, h)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14">nvboot measure: %s layout, median of %d cold boots (%s, %s)</text>`+"\n",
		l, len(r.Runs[l]), r.Storage.Name, r.Machine.String(r.Accel))
	colors := []string{"#8da0cb", "#66c2a5", "#fc8d62", "#e78ac3", "#a6d854", "#ffd92f", "#e5c494"}
	for i, br := range bars {
		y := 40 + rowH*float64(i)
		fmt.Fprintf(&b, `<text x="10" y="%.0f">%s</text>`+"\n", y+15, br.name)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="18" fill="%s"/>`+"\n",
			left+br.start*scale, y+2, math.Max((br.end-br.start)*scale, 1), colors[i%len(colors)])
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f">%.0f ms</text>`+"\n", left+br.end*scale+4, y+15, br.end-br.start)
	}
	y := 40 + rowH*float64(len(bars))
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, y+5, left+total*scale, y+5)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">0</text><text x="%.0f" y="%.0f" text-anchor="end">%.0f ms</text>`+"\n",
		left, y+20, left+total*scale, y+20, total)
	b.WriteString("</svg>\n")
	return b.Bytes()
}
