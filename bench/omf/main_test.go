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
	o, err := measure(config{Runs: 1, Units: []int{4096}}, t.TempDir(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Results) != len(methods) || o.Ratios["omf_vs_read_4k"] <= 0 {
		t.Fatalf("results %d, ratios %v", len(o.Results), o.Ratios)
	}
}
