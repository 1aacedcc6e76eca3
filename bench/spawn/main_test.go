package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"testing"
)

// The whole benchmark, tiny: one JSON object on stdout holding the ratios
// the issue names, each a positive number, and a row for every layout.
func TestRunJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("builds four programs and runs examples/cgi")
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir("../.."); err != nil { // run from the repository root, as documented
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chdir(root) })
	var out bytes.Buffer
	if err := run([]string{"-json", "-runs", "3", "-cgi-time", "200ms"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var rep report
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v", err)
	}
	if dec.More() {
		t.Fatal("more than one JSON value on stdout")
	}
	if rep.Bench != "spawn" {
		t.Errorf("bench %q", rep.Bench)
	}
	for _, r := range []string{"pooled_vs_exec", "pooled_reaped_vs_exec", "pooled_reuse_vs_exec",
		"cgi_throughput_pooled_vs_exec", "cgi_throughput_pooled_fresh_vs_exec"} {
		if v, ok := rep.Ratios[r]; !ok || v <= 0 {
			t.Errorf("ratio %s missing or not positive: %v", r, rep.Ratios)
		}
	}
	names := map[string]bool{}
	for _, r := range rep.Results {
		names[r.Name] = true
	}
	for _, l := range []string{"exec_elf", "pooled", "pooled_reaped", "pooled_reuse"} {
		for _, what := range []string{"spawn_to_main_", "spawn_to_exit_"} {
			if !names[what+l] {
				t.Errorf("no result %s%s", what, l)
			}
		}
	}
	for _, r := range []string{"cgi_small_c1_exec_throughput", "cgi_bigbss_c10_pooled_reuse_latency",
		"pool_memory_peak_reduce_on", "pool_memory_after_idle_reduce_off"} {
		if !names[r] {
			t.Errorf("no result %s", r)
		}
	}
}

func TestParts(t *testing.T) {
	if _, err := parseParts("latency,cgi"); err != nil {
		t.Error(err)
	}
	if _, err := parseParts("latency,bogus"); err == nil {
		t.Error("an unknown part was accepted")
	}
}
