package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"text/tabwriter"
)

// result is one raw figure (DESIGN.md, "Measuring").
type result struct {
	Name   string  `json:"name"`
	Unit   string  `json:"unit"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Runs   int     `json:"runs"`
}

// output is the -json object: the ratios the issue names, the raw figures,
// and the environment they were taken in.
type output struct {
	Bench   string             `json:"bench"`
	Ratios  map[string]float64 `json:"ratios"`
	Results []result           `json:"results"`
	Env     map[string]string  `json:"env"`
}

// samples collects the per-run values of every figure, in first-seen order.
type samples struct {
	order []string
	unit  map[string]string
	vals  map[string][]float64
}

func newSamples() *samples {
	return &samples{unit: map[string]string{}, vals: map[string][]float64{}}
}

func (s *samples) add(name, unit string, v float64) {
	if _, ok := s.unit[name]; !ok {
		s.order = append(s.order, name)
		s.unit[name] = unit
	}
	s.vals[name] = append(s.vals[name], v)
}

// median returns the median of a figure, 0 if it was never measured.
func (s *samples) median(name string) float64 { return stats(name, "", s.vals[name]).Median }

func (s *samples) results() []result {
	var rs []result
	for _, n := range s.order {
		rs = append(rs, stats(n, s.unit[n], s.vals[n]))
	}
	return rs
}

func stats(name, unit string, vs []float64) result {
	v := slices.Clone(vs)
	sort.Float64s(v)
	r := result{Name: name, Unit: unit, Runs: len(v)}
	if len(v) == 0 {
		return r
	}
	r.Min, r.Max = v[0], v[len(v)-1]
	if n := len(v); n%2 == 1 {
		r.Median = v[n/2]
	} else {
		r.Median = (v[n/2-1] + v[n/2]) / 2
	}
	return r
}

func writeJSON(w io.Writer, o output) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(o)
}

func writeTable(w io.Writer, o output) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tunit\tmedian\tmin\tmax\truns\t")
	for _, r := range o.Results {
		fmt.Fprintf(tw, "%s\t%s\t%.4g\t%.4g\t%.4g\t%d\t\n", r.Name, r.Unit, r.Median, r.Min, r.Max, r.Runs)
	}
	fmt.Fprintln(tw, "\t\t\t\t\t\t")
	fmt.Fprintln(tw, "ratio\t\tvalue\t\t\t\t")
	var names []string
	for n := range o.Ratios {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(tw, "%s\t\t%.3g\t\t\t\t\n", n, o.Ratios[n])
	}
	for _, k := range []string{"storage", "pheap_mode", "flush", "cpu"} {
		fmt.Fprintf(tw, "%s: %s\t\t\t\t\t\t\n", k, o.Env[k])
	}
	return tw.Flush()
}
