package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nvboot/nvboot/format/benchjson"
)

// report is a run: the stages of every boot of every firmware path.
type report struct {
	Opts    *options
	Cmdline string                                // the image's command line
	Runs    map[string][]map[string]time.Duration // firmware name -> boots -> stage -> since power-on
}

type output struct {
	Bench   string             `json:"bench"`
	Ratios  map[string]float64 `json:"ratios"`
	Results []benchjson.Result `json:"results"`
	Env     map[string]string  `json:"env"`
}

// values are a stage's times over a path's boots, in ms.
func (r *report) values(fw, stage string) []float64 {
	var v []float64
	for _, b := range r.Runs[fw] {
		if d, ok := b[stage]; ok {
			v = append(v, ms(d))
		}
	}
	return v
}

func stats(name string, v []float64) benchjson.Result {
	s := benchjson.Stats(name, "ms", v)
	s.Median, s.Min, s.Max = round(s.Median), round(s.Min), round(s.Max)
	return s
}

func round(v float64) float64 { return math.Round(v*10) / 10 }

// base is the path the ratios compare with: seabios when measured, else the
// first.
func (r *report) base() string {
	for _, f := range r.Opts.Firmwares {
		if f.Name == "seabios" {
			return f.Name
		}
	}
	return r.Opts.Firmwares[0].Name
}

// ratios are each other path's medians over the base's, for power-on to
// the handover and to kv's first answer.
func (r *report) ratios() map[string]float64 {
	out := map[string]float64{}
	base := r.base()
	for _, f := range r.Opts.Firmwares {
		if f.Name == base {
			continue
		}
		for _, stage := range []string{StageHandover, StageAnswer} {
			b := benchjson.Stats("", "", r.values(base, stage)).Median
			x := benchjson.Stats("", "", r.values(f.Name, stage)).Median
			if b > 0 && x > 0 {
				out[fmt.Sprintf("%s.%s_vs_%s", stage, jsonName(f.Name), jsonName(base))] = math.Round(x/b*1000) / 1000
			}
		}
	}
	return out
}

func jsonName(s string) string { return strings.ReplaceAll(s, "-", "_") }

func (r *report) writeJSON(w io.Writer) error {
	o := output{Bench: "firmware", Ratios: r.ratios(), Env: r.env()}
	for _, f := range r.Opts.Firmwares {
		for _, s := range Stages {
			o.Results = append(o.Results, stats(jsonName(f.Name)+"."+s.Key, r.values(f.Name, s.Key)))
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(o)
}

// env is what the figures depend on besides the code.
func (r *report) env() map[string]string {
	e := map[string]string{
		"clock":    "device: TCG, -icount shift=N,sleep=on",
		"cpu_rate": strconv.FormatInt(r.Opts.CPURate, 10),
		"storage":  r.Opts.Storage.Name,
		"cmdline":  r.Cmdline,
	}
	if out, err := exec.Command("qemu-system-x86_64", "--version").Output(); err == nil {
		e["qemu"] = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	for _, f := range r.Opts.Firmwares {
		e["firmware."+jsonName(f.Name)] = f.About
	}
	return e
}

func (r *report) writeTable(w io.Writer) error {
	base := r.base()
	fmt.Fprintf(w, "Guest time since power-on, ms, median (min-max) of %d boots; disk %s; %d instructions/s (device clock)\n\n",
		r.Opts.Runs, r.Opts.Storage.About, r.Opts.CPURate)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "stage")
	for _, f := range r.Opts.Firmwares {
		fmt.Fprintf(tw, "\t%s", f.Name)
	}
	fmt.Fprintln(tw)
	for _, s := range Stages {
		fmt.Fprint(tw, s.Label)
		for _, f := range r.Opts.Firmwares {
			st := stats("", r.values(f.Name, s.Key))
			fmt.Fprintf(tw, "\t%.0f (%.0f-%.0f)", st.Median, st.Min, st.Max)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "first answer, minus %s's", base)
	b := stats("", r.values(base, StageAnswer)).Median
	for _, f := range r.Opts.Firmwares {
		fmt.Fprintf(tw, "\t%+.0f", stats("", r.values(f.Name, StageAnswer)).Median-b)
	}
	fmt.Fprintln(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, f := range r.Opts.Firmwares {
		fmt.Fprintf(w, "%-12s %s\n", f.Name, f.About)
	}
	return nil
}
