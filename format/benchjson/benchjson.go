package benchjson

import (
	"slices"
	"sort"
)

// Result is one raw figure: the median, min and max of its runs.
type Result struct {
	Name   string  `json:"name"`
	Unit   string  `json:"unit"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Runs   int     `json:"runs"`
}

// Stats sums up the values of a figure's runs.
func Stats(name, unit string, vs []float64) Result {
	s := slices.Clone(vs)
	sort.Float64s(s)
	r := Result{Name: name, Unit: unit, Runs: len(s)}
	if len(s) == 0 {
		return r
	}
	r.Min, r.Max = s[0], s[len(s)-1]
	if n := len(s); n%2 == 1 {
		r.Median = s[n/2]
	} else {
		r.Median = (s[n/2-1] + s[n/2]) / 2
	}
	return r
}
