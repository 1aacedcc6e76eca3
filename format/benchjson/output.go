package benchjson

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
)

// Output is the one JSON object a benchmark prints with -json: the ratios
// its issue names, the raw figures, and the environment they were taken
// in. (bench/omf, bench/pager, bench/pheap and bench/clockcal use it;
// bench/exec, bench/spawn, bench/firmware and bench/bigapp still have their
// own types with the same four fields and more.)
type Output struct {
	Bench   string             `json:"bench"`
	Env     map[string]string  `json:"env"`
	Ratios  map[string]float64 `json:"ratios"`
	Results []Result           `json:"results"`
}

// Samples collects the per-run values of every figure, in first-seen order.
type Samples struct {
	order []string
	unit  map[string]string
	vals  map[string][]float64
}

// NewSamples returns an empty collection.
func NewSamples() *Samples {
	return &Samples{unit: map[string]string{}, vals: map[string][]float64{}}
}

// Add records one run's value of a figure.
func (s *Samples) Add(name, unit string, v float64) {
	if _, ok := s.unit[name]; !ok {
		s.order = append(s.order, name)
		s.unit[name] = unit
	}
	s.vals[name] = append(s.vals[name], v)
}

// Median is a figure's median, 0 if it was never measured.
func (s *Samples) Median(name string) float64 { return Stats(name, "", s.vals[name]).Median }

// Results sums up every figure, in the order they were first added.
func (s *Samples) Results() []Result {
	var rs []Result
	for _, n := range s.order {
		rs = append(rs, Stats(n, s.unit[n], s.vals[n]))
	}
	return rs
}

// WriteJSON prints o as indented JSON.
func WriteJSON(w io.Writer, o Output) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(o)
}

// WriteTable prints o for a reader: figures, ratios, environment.
func WriteTable(w io.Writer, o Output) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tunit\tmedian\tmin\tmax\truns\t")
	for _, r := range o.Results {
		fmt.Fprintf(tw, "%s\t%s\t%.4g\t%.4g\t%.4g\t%d\t\n", r.Name, r.Unit, r.Median, r.Min, r.Max, r.Runs)
	}
	fmt.Fprintln(tw, "\t\t\t\t\t\t")
	fmt.Fprintln(tw, "ratio\t\tvalue\t\t\t\t")
	for _, n := range slices.Sorted(maps.Keys(o.Ratios)) {
		fmt.Fprintf(tw, "%s\t\t%.3g\t\t\t\t\n", n, o.Ratios[n])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, k := range slices.Sorted(maps.Keys(o.Env)) {
		fmt.Fprintf(w, "%s: %s\n", k, o.Env[k])
	}
	return nil
}

// AdoptGuestRatios makes a guest's ratios the unprefixed ones of o, the
// names an issue gives to its target on the device, and keeps o's own (the
// host's) as host_*.
func (o *Output) AdoptGuestRatios(guest map[string]float64) {
	host := o.Ratios
	o.Ratios = make(map[string]float64, len(host)+len(guest))
	for k, v := range host {
		o.Ratios["host_"+k] = v
	}
	for k, v := range guest {
		o.Ratios[k] = v
	}
}
