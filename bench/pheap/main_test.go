package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"testing"
)

// The whole benchmark, tiny: one JSON object on stdout with the ratios the
// issue names and a result for every case.
func TestRunJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the C side and fills stores")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	if _, err := os.Stat("/usr/include/libpmemobj.h"); err != nil {
		t.Skip("no libpmemobj-dev")
	}
	var out bytes.Buffer
	err := run([]string{"-json", "-n", "200", "-runs", "1", "-big", "4194304", "-dir", t.TempDir()}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var o output
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		t.Fatalf("stdout is not one JSON object: %v", err)
	}
	if dec.More() {
		t.Fatal("more than one JSON value on stdout")
	}
	for _, r := range []string{"tx_throughput_vs_pmemobj", "tx_throughput_vs_bbolt", "durability_overhead"} {
		if v, ok := o.Ratios[r]; !ok || v == 0 {
			t.Errorf("ratio %s missing or zero: %v", r, o.Ratios)
		}
	}
	if o.Bench != "pheap" || len(o.Results) != 2*6*2+2*2+2+2*3 { // 2 workloads × (6 systems × throughput, latency; pheap fences, lines; paired overhead); open
		t.Errorf("bench %q with %d results", o.Bench, len(o.Results))
	}
	for _, r := range o.Results {
		if r.Runs != 1 || r.Median <= 0 {
			t.Errorf("%+v", r)
		}
	}
}
