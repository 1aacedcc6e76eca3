package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/bench/exec/plan"
)

// TestQuickRun runs the benchmark end to end in -quick mode, in-process, and
// checks the shape of its JSON and that every layout ran the same program to
// the same output. It never looks at how fast anything was. The VM part runs
// when QEMU is installed and $NVBOOT_KERNEL names the appliance kernel (make
// test sets it).
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs, drops the page cache and may boot a VM")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop the page cache")
	}
	args := []string{"-quick", "-json", "-storage", "sd"}
	withVM := os.Getenv("NVBOOT_KERNEL") != ""
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		withVM = false
	}
	if !withVM {
		t.Log("no QEMU or $NVBOOT_KERNEL unset: host part only")
		args = append(args, "-vm=false")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("run %v: %v\nstderr:\n%s", args, err, stderr.String())
	}

	// Exactly one JSON object on stdout.
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, stdout.String())
	}
	if dec.More() {
		t.Fatalf("more than one JSON value on stdout:\n%s", stdout.String())
	}
	for _, k := range []string{"bench", "ratios", "results"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	var out output
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Bench != "exec" {
		t.Errorf("bench = %q, want exec", out.Bench)
	}

	// Every result has all six fields.
	var results []map[string]any
	if err := json.Unmarshal(raw["results"], &results); err != nil {
		t.Fatal(err)
	}
	if len(results) == 0 {
		t.Fatal("no results")
	}
	for _, r := range results {
		for _, k := range []string{"name", "unit", "median", "min", "max", "runs"} {
			if _, ok := r[k]; !ok {
				t.Errorf("result %v lacks %q", r, k)
			}
		}
	}
	names := map[string]bool{}
	for _, r := range out.Results {
		names[r.Name] = true
	}
	for _, n := range []string{"host/big/cold/elf/time", "host/big/cold/off2f-tmpfs-text/time",
		"host/tiny/warm/tmpfs/minflt", "host/make/cold/elf/time", "host/mid/cold/elf/read"} {
		if !names[n] {
			t.Errorf("no result %q", n)
		}
	}

	want := []string{"host_big_cold_off2f_vs_elf", "host_big_warm_off2f_vs_elf", "host_mid_cold_off2f_vs_elf",
		"host_tiny_off2f_minus_elf_us", "host_make_off2f_vs_elf"}
	groups := []string{"host/big/cold", "host/big/warm", "host/mid/cold", "host/tiny/warm", "host/make/cold"}
	// Layouts every place must have run (the host adds the huge-page tmpfs
	// ones when it can mount such a tmpfs).
	layouts := map[string][]string{"host": {"elf", "off2f-tmpfs-text", "tmpfs"}}
	if withVM {
		want = append(want, "big_cold_off2f_vs_elf_sd", "big_cold_off2f_vs_daxelf_sd", "make_off2f_vs_elf_sd",
			"big_warm_off2f_vs_elf", "tiny_off2f_minus_elf_us")
		groups = append(groups, "vm-sd/big/cold", "vm-sd/mid/warm", "vm-sd/make/cold")
		layouts["vm-sd"] = []string{"elf", "off2f", "dax-elf", "tmpfs"}
	}
	for _, k := range want {
		if _, ok := out.Ratios[k]; !ok {
			t.Errorf("no ratio %q (have %v)", k, out.Ratios)
		}
	}

	// The same program, the same output, in every layout.
	for _, g := range groups {
		byLayout := out.Outputs[g]
		place := g[:strings.Index(g, "/")]
		for _, l := range layouts[place] {
			if _, ok := byLayout[l]; !ok {
				t.Errorf("%s: no output of layout %s: %v", g, l, byLayout)
			}
		}
		var first string
		for l, o := range byLayout {
			if !strings.HasPrefix(o, "exit 0: ") || len(o) <= len("exit 0: ") {
				t.Errorf("%s/%s: output %q, want exit 0 and some stdout", g, l, o)
			}
			if first == "" {
				first = o
			} else if o != first {
				t.Errorf("%s: layouts differ: %q vs %q", g, first, o)
			}
		}
	}
	if !strings.HasPrefix(out.Outputs["host/big/cold"]["elf"], "exit 0: big: 80 functions") {
		t.Errorf("big printed %q", out.Outputs["host/big/cold"]["elf"])
	}
}

// Records survive a console that adds carriage returns and kernel messages.
func TestParseConsole(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("[    1.234] random: crng init done\r\n")
	plan.Emit(&b, plan.Record{Type: plan.TypeRun, Group: "big/cold", Layout: "elf", Run: 1, NS: 5, DevSectors: -1})
	b.WriteString("[    2.000] some kernel line ")
	plan.Emit(&b, plan.Record{Type: plan.TypeDone})
	recs, err := plan.Parse(strings.NewReader(strings.ReplaceAll(b.String(), "\n", "\r\n")))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].NS != 5 || recs[0].Layout != "elf" || recs[1].Type != plan.TypeDone {
		t.Fatalf("got %+v", recs)
	}
	if _, err := plan.Parse(strings.NewReader("no records\n")); err == nil {
		t.Error("output without a done record accepted")
	}
	b.Reset()
	plan.Emit(&b, plan.Record{Type: plan.TypeError, Err: "dropping caches: permission denied"})
	if _, err := plan.Parse(&b); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("error record: got %v", err)
	}
}
