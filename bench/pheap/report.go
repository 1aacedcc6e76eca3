package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/nvboot/nvboot/internal/benchjson"
)

// result is one raw figure (docs/DESIGN.md#measuring-method).
type result = benchjson.Result

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

var stats = benchjson.Stats

func writeJSON(w io.Writer, o output) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(o)
}

// decodeOutput reads one output object, refusing unknown fields and
// anything after it.
func decodeOutput(r io.Reader, o *output) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(o); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
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
	if err := tw.Flush(); err != nil {
		return err
	}
	var keys []string
	for k := range o.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(w)
	for _, k := range keys {
		fmt.Fprintf(w, "%s: %s\n", k, o.Env[k])
	}
	return nil
}
