package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
)

func TestParseFlags(t *testing.T) {
	t.Setenv("NVBOOT_KERNEL", "/some/bzImage")
	tests := []struct {
		name string
		args []string
		want string // in the error; "": no error
	}{
		{"defaults", nil, ""},
		{"unknown firmware", []string{"-firmware", "seabios,coreboot"}, `firmware "coreboot": unknown`},
		{"no firmware", []string{"-firmware", ","}, "names no path"},
		{"no runs", []string{"-runs", "0"}, "-runs 0"},
		{"bad rate", []string{"-cpu-rate", "3"}, "-cpu-rate"},
		{"bad storage", []string{"-storage", "tape"}, `"tape"`},
		{"extra argument", []string{"x"}, "unexpected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, io.Discard)
			if tt.want == "" {
				if err != nil && !strings.Contains(err.Error(), "ovmf") && !strings.Contains(err.Error(), "qboot") {
					t.Fatal(err) // a firmware not installed here is the only excuse
				}
				if err == nil && (c.Runs != 3 || len(c.Firmwares) != 3 || c.Storage.Name != "sd" || c.CPURate != vm.DefaultCPURate) {
					t.Errorf("defaults: %+v", c)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one with %q", err, tt.want)
			}
		})
	}
	t.Setenv("NVBOOT_KERNEL", "")
	if _, err := parseFlags([]string{"-firmware", "seabios"}, io.Discard); err == nil || !strings.Contains(err.Error(), "NVBOOT_KERNEL") {
		t.Errorf("no kernel: %v", err)
	}
}

// The report: a result per path and stage, ratios against SeaBIOS, the
// table with every path and stage.
func TestReport(t *testing.T) {
	ms := time.Millisecond
	boot := func(h, a time.Duration) map[string]time.Duration {
		return map[string]time.Duration{StageHandover: h, StageInit: h + 50*ms, StageReady: a - 10*ms, StageAnswer: a}
	}
	sea, _ := lookupFirmware("seabios")
	ovmf, _ := lookupFirmware("ovmf")
	sd, _ := vm.Profile("sd")
	r := &report{Opts: &options{Runs: 2, Firmwares: []firmware{sea, ovmf}, Storage: sd, CPURate: vm.DefaultCPURate},
		Runs: map[string][]map[string]time.Duration{
			"seabios": {boot(1000*ms, 2000*ms), boot(1100*ms, 2200*ms)},
			"ovmf":    {boot(2000*ms, 3000*ms), boot(2200*ms, 3400*ms)},
		}}
	var js bytes.Buffer
	if err := r.writeJSON(&js); err != nil {
		t.Fatal(err)
	}
	var o output
	dec := json.NewDecoder(&js)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		t.Fatal(err)
	}
	if o.Bench != "firmware" || len(o.Results) != 2*len(Stages) {
		t.Errorf("bench %q, %d results", o.Bench, len(o.Results))
	}
	for k, want := range map[string]float64{"power_on_to_handover.ovmf_vs_seabios": 2, "power_on_to_answer.ovmf_vs_seabios": 3200.0 / 2100} {
		if got := o.Ratios[k]; got < want-0.001 || got > want+0.001 {
			t.Errorf("ratio %s = %v, want %.3f", k, got, want)
		}
	}
	for _, res := range o.Results {
		if res.Name == "ovmf.power_on_to_answer" && (res.Median != 3200 || res.Min != 3000 || res.Max != 3400 || res.Runs != 2) {
			t.Errorf("%+v", res)
		}
	}
	var tab bytes.Buffer
	if err := r.writeTable(&tab); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"seabios", "ovmf", "kernel hands over to init", "kv's first answer", "+1100", "3200 (3000-3400)"} {
		if !strings.Contains(tab.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tab.String())
		}
	}
}

// The benchmark itself, once per path it compares: every stage measured
// on the disk path and on SeaBIOS's -kernel path.
func TestRunJSON(t *testing.T) {
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	if _, err := os.Stat(vm.OVMF); err != nil {
		t.Skipf("no OVMF: %v", err)
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
	if err := run(t.Context(), []string{"-json", "-runs", "1", "-firmware", "seabios,ovmf", "-storage", "host", "-kernel", k}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var o output
	if err := json.NewDecoder(&out).Decode(&o); err != nil {
		t.Fatal(err)
	}
	for _, res := range o.Results {
		if res.Runs != 1 || res.Median <= 0 {
			t.Errorf("%s: %+v", res.Name, res)
		}
	}
	if len(o.Results) != 2*len(Stages) || o.Ratios["power_on_to_answer.ovmf_vs_seabios"] <= 0 {
		t.Errorf("results %d, ratios %v", len(o.Results), o.Ratios)
	}
}
