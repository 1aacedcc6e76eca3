package main

import (
	"slices"
)

// Result is one raw figure of the benchmark (docs/DEVICE-CLOCK.md#measuring-method).
type Result struct {
	Name   string  `json:"name"`
	Unit   string  `json:"unit"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Runs   int     `json:"runs"`
	P99    float64 `json:"p99,omitempty"`
	Note   string  `json:"note,omitempty"`
}

// summarise makes a Result of samples.
func summarise(name, unit string, xs []float64) Result {
	r := Result{Name: name, Unit: unit, Runs: len(xs)}
	if len(xs) == 0 {
		return r
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	r.Median, r.Min, r.Max = quantile(s, 0.5), s[0], s[len(s)-1]
	r.P99 = quantile(s, 0.99)
	return r
}

// quantile of sorted s (nearest rank).
func quantile(s []float64, q float64) float64 {
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
