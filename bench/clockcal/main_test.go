package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/guestrun"
	"github.com/nvboot/nvboot/host/vm/vmtest"
)

func TestFlags(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-h"}, &out, io.Discard); err == nil || !strings.Contains(out.String(), "Examples:") {
		t.Fatalf("-h: %v, %q", err, out.String())
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-runs", "0", "-guest", "off"}, "-runs 0"},
		{[]string{"-dir", "/nonexistent/dir", "-guest", "off"}, "-dir"},
		{[]string{"-clock", "sundial", "-guest", "off"}, "sundial"},
		{[]string{"-guest", "off", "extra"}, "unexpected argument"},
	} {
		if _, err := parseFlags(tc.args, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want one saying %q", tc.args, err, tc.err)
		}
	}
	if err := inside([]string{"-dir", t.TempDir()}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "both programs") {
		t.Errorf("inside without programs: %v", err)
	}
}

// smallSizes are the workloads at a size a test can afford.
var smallSizes = sizes{SHA: 64 << 10, Copy: 1 << 20, Chase: 1 << 20, Steps: 1 << 12, Puts: 20, HeapMiB: 4}

// TestMeasureWorkloads runs every workload, small, on this machine with the
// static programs both sides run: each gives one positive time, and the
// output goes through the markers and back.
func TestMeasureWorkloads(t *testing.T) {
	dir := t.TempDir()
	b, err := build(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	o, err := measure(smallSizes, b.programs, t.TempDir(), 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range o.Results {
		names = append(names, r.Name)
		if r.Runs != 1 || !(r.Median > 0) || r.Unit != "ms" {
			t.Errorf("%+v", r)
		}
	}
	var want []string
	for _, w := range []string{"exec_exit", "kv_fresh", "kv_existing", "sha256", "memcopy", "randread", "pheap_tx"} {
		want = append(want, w, w+".wall")
	}
	if !slices.Equal(names, want) {
		t.Errorf("results %v, want %v", names, want)
	}
	for _, k := range []string{"cpu_model", "cpu_flags", "mount", "gomaxprocs", "kernel"} {
		if o.Env[k] == "" {
			t.Errorf("env has no %s: %v", k, o.Env)
		}
	}
	var console bytes.Buffer
	console.WriteString("[    1.0] booting\n")
	if err := writeMarked(&console, o); err != nil {
		t.Fatal(err)
	}
	console.WriteString("NVBOOT-SCRIPT-EXIT 0\n")
	back, err := guestrun.ParseOutput(console.String(), jsonBegin, jsonEnd)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != len(o.Results) || back.Results[0] != o.Results[0] || back.Env["mount"] != o.Env["mount"] {
		t.Errorf("through the markers: %+v, want %+v", back, o)
	}
}

func TestWalkVisitsEveryIndex(t *testing.T) {
	p := cycle(1000)
	seen := map[uint32]bool{}
	i := uint32(0)
	for range len(p) {
		seen[i] = true
		i = p[i]
	}
	if len(seen) != len(p) || i != 0 || walk(p, len(p)) != 0 {
		t.Fatalf("the permutation is not one cycle: %d of %d indices seen, back at %d", len(seen), len(p), i)
	}
}

func TestParseCPUInfo(t *testing.T) {
	text := "processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2596.134\nflags\t\t: fpu sse2 avx2 sha_ni erms hypervisor\n\n" +
		"processor\t: 1\nmodel name\t: other\nflags\t\t: fpu\n"
	c, err := parseCPUInfo(text)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "AMD EPYC" || c.MHz != "2596.134" || !c.Flags["sha_ni"] || c.Flags["fpu"] != true || len(c.Flags) != 6 {
		t.Errorf("%+v", c)
	}
	if got := c.goFlags(); !slices.Equal(got, []string{"avx2", "erms", "sha_ni"}) {
		t.Errorf("goFlags %v", got)
	}
	if _, err := parseCPUInfo("processor : 0\n"); err == nil {
		t.Error("a cpuinfo without flags accepted")
	}
}

func TestMatchGODEBUG(t *testing.T) {
	host := cpuInfo{Flags: map[string]bool{"avx2": true, "erms": true, "fsrm": true, "sha_ni": true, "hypervisor": true}}
	if got, want := matchGODEBUG(host, []string{"avx2"}), "cpu.erms=off,cpu.fsrm=off,cpu.sha=off"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := matchGODEBUG(host, []string{"avx2", "erms", "fsrm", "sha_ni", "avx512f"}); got != "" {
		t.Errorf("nothing to turn off: got %q", got)
	}
}

func TestCombine(t *testing.T) {
	host := &benchjson.Output{Env: map[string]string{"cpu_model": "AMD EPYC"},
		Results: []benchjson.Result{{Name: "sha256", Unit: "ms", Median: 2, Runs: 3}, {Name: "memcopy", Unit: "ms", Median: 10, Runs: 3}}}
	guest := &benchjson.Output{Env: map[string]string{"cpu_model": "QEMU"},
		Results: []benchjson.Result{{Name: "sha256", Unit: "ms", Median: 100, Runs: 3}, {Name: "memcopy", Unit: "ms", Median: 5, Runs: 3}}}
	host.Results = append(host.Results, benchjson.Result{Name: "sha256.wall", Unit: "ms", Median: 4, Runs: 3})
	guest.Results = append(guest.Results, benchjson.Result{Name: "sha256.wall", Unit: "ms", Median: 100, Runs: 3})
	o := combine(host, guest, "device")
	if o.Ratios["device_vs_host.sha256"] != 50 || o.Ratios["device_vs_host.memcopy"] != 0.5 || o.Ratios["device_vs_host_wall.sha256"] != 25 || len(o.Ratios) != 3 {
		t.Errorf("ratios %v", o.Ratios)
	}
	var names []string
	for _, r := range o.Results {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"host.sha256", "host.memcopy", "host.sha256.wall", "device.sha256", "device.memcopy", "device.sha256.wall"}) {
		t.Errorf("results %v", names)
	}
	if o.Env["host_cpu_model"] != "AMD EPYC" || o.Env["guest_cpu_model"] != "QEMU" {
		t.Errorf("env %v", o.Env)
	}
	if w := combine(host, guest, "wall"); w.Ratios["emulator_vs_host.sha256"] != 50 || w.Results[3].Name != "emulator.sha256" {
		t.Errorf("wall clock: %v %v", w.Ratios, w.Results)
	}
	if h := combine(host, nil, "device"); len(h.Ratios) != 0 || len(h.Results) != 3 {
		t.Errorf("host only: %v %v", h.Ratios, h.Results)
	}
}

// TestGuestAndHost runs the whole benchmark once: the guest on the device
// clock and the host, one run each, and the JSON holds every workload's
// figure on both sides and its ratio.
func TestGuestAndHost(t *testing.T) {
	vmtest.Kernel(t, "mkfs.ext4")
	var out bytes.Buffer
	if err := run([]string{"-json", "-guest", "on", "-runs", "1", "-dir", t.TempDir()}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var o benchjson.Output
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		t.Fatalf("stdout is not one JSON object: %v", err)
	}
	for _, w := range workloads(fullSizes, programs{}, "") {
		for _, r := range []string{"device_vs_host.", "device_vs_host_wall."} {
			if v := o.Ratios[r+w.name]; !(v > 0) {
				t.Errorf("ratio %s%s is %v", r, w.name, v)
			}
		}
	}
	if len(o.Results) != 28 {
		t.Errorf("%d results, want 7 workloads × CPU and wall × 2 sides", len(o.Results))
	}
	if o.Env["clock"] != "device" || o.Env["cpu_rate"] != "1000000000" || !strings.HasPrefix(o.Env["guest_mount"], "tmpfs ") ||
		o.Env["host_gomaxprocs"] != "1" || o.Env["guest_gomaxprocs"] != "1" {
		t.Errorf("env %v", o.Env)
	}
	// The host ran the guest's instruction set: every feature the guest
	// lacks is off in the host's GODEBUG.
	for _, f := range strings.Fields(o.Env["host_cpu_flags"]) {
		if !strings.Contains(" "+o.Env["guest_cpu_flags"]+" ", " "+f+" ") && !strings.Contains(o.Env["host_godebug"], "cpu."+goFeatures[f]+"=off") {
			t.Errorf("the guest lacks %s, the host's GODEBUG %q keeps it", f, o.Env["host_godebug"])
		}
	}
}

// pidCPU reads a process's CPU clock: for this process it falls between
// two readings of this process's own.
func TestPidCPU(t *testing.T) {
	before := processCPU()
	fill(make([]byte, 1<<20), 5)
	got, err := pidCPU(os.Getpid())
	after := processCPU()
	if err != nil || got < before || got > after {
		t.Fatalf("pidCPU = %v, %v; want within [%v, %v]", got, err, before, after)
	}
	for _, pid := range []int{1<<28 - 1, 1 << 30, 0} {
		if _, err := pidCPU(pid); err == nil {
			t.Errorf("the CPU clock of process %d, which does not exist, read", pid)
		}
	}
}
