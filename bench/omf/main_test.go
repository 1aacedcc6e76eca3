package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestUnitsAndHelp(t *testing.T) {
	if us, err := parseUnits("1, 4096,32768"); err != nil || len(us) != 3 {
		t.Fatalf("parseUnits = %v, %v", us, err)
	}
	for _, bad := range []string{"0", "3", "65536", "x", ""} {
		if _, err := parseUnits(bad); err == nil {
			t.Errorf("parseUnits(%q) accepted", bad)
		}
	}
	var out bytes.Buffer
	if err := run([]string{"-h"}, &out, io.Discard); err == nil || !strings.Contains(out.String(), "Examples:") {
		t.Fatalf("-h: %v, %q", err, out.String())
	}
	if err := run([]string{"-runs", "0", "-guest", "off"}, io.Discard, io.Discard); err == nil {
		t.Fatal("-runs 0 accepted")
	}
}

// TestMeasureRuns: one run in a temporary directory gives a figure for
// every method and the ratios.
func TestMeasureRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 16 MiB file per method")
	}
	o, err := measure(config{Runs: 1, Units: []int{4096, 32768}}, t.TempDir(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, r := range o.Results {
		names[r.Name] = true
	}
	for _, m := range methods {
		if !names[figure(m, 4096)] {
			t.Errorf("no %s", figure(m, 4096))
		}
	}
	for _, c := range []string{"cost_pread_4k", "cost_demand_fault", "cost_populate_2m", "cost_omf_readblock_release", "cost_omf_close", "cost_omf_open_close", "cost_region_populate_32k"} {
		if !names[c] {
			t.Errorf("no %s among the costs", c)
		}
	}
	for _, r := range []string{"omf_vs_read_4k", "omf_vs_mmap_32k", "omf_open_vs_mmap_open_32k"} {
		if o.Ratios[r] <= 0 {
			t.Errorf("no %s among the ratios %v", r, o.Ratios)
		}
	}
}
