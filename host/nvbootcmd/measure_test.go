package nvbootcmd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nvboot/nvboot/host/measure"
	"github.com/nvboot/nvboot/host/vm"
)

// The device clock makes boot time a regression check: cold boots of the
// demo on the instruction-counted clock must put every stage in boot order
// and come out the same whatever else the host runs. Two measures run at
// once, each the other's load (and each a QEMU beside the other's), and
// every stage of every boot must agree within 0.5 % across both. No
// absolute time is asserted: that is the benchmark's job, not a test's.
func TestMeasureDeviceClock(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU eight times")
	}
	if os.Getenv("NVBOOT_KERNEL") == "" {
		t.Skip("NVBOOT_KERNEL is not set (make test sets it)")
	}
	type output struct {
		Env     map[string]string  `json:"env"`
		Ratios  map[string]float64 `json:"ratios"`
		Results []struct {
			Name     string  `json:"name"`
			Median   float64 `json:"median"`
			Min, Max float64
			Runs     int `json:"runs"`
		} `json:"results"`
	}
	outs := make([]output, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stdout, stderr, err := execute("measure", "-clock", "device", "-layouts", "off2f", "-runs", "3", "-storage", "sd", "-json",
				"-work", filepath.Join(t.TempDir(), "work"))
			if err == nil {
				err = json.Unmarshal([]byte(stdout), &outs[i])
			}
			if err != nil {
				errs[i] = fmt.Errorf("measure %d: %w\n%s", i, err, stderr)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	lo, hi := map[string]float64{}, map[string]float64{}
	for _, out := range outs {
		if out.Env["clock"] != vm.ClockDevice || out.Env["cpu_rate"] != "1000000000" || out.Env["accel"] != "tcg" {
			t.Errorf("env %v: want the device clock at 1e9 under tcg", out.Env)
		}
		median := map[string]float64{}
		for _, r := range out.Results {
			name, ok := strings.CutPrefix(r.Name, "off2f.")
			if !ok {
				continue
			}
			median[name] = r.Median
			if r.Runs != 3 {
				t.Errorf("%s: %d runs, want 3", r.Name, r.Runs)
			}
			if _, seen := lo[name]; !seen || r.Min < lo[name] {
				lo[name] = r.Min
			}
			hi[name] = max(hi[name], r.Max)
		}
		for _, st := range measure.Stages {
			if _, ok := median[st]; !ok {
				t.Errorf("stage %s missing from %v", st, median)
			}
		}
		// Boot order. ready and service are both after state but not
		// ordered between them: nvinit polls WaitFor every 5 ms and the
		// answer every 1 ms, so the first answer can be marked before the
		// readiness, by at most about one poll.
		for _, chain := range [][]string{
			{measure.StageLoaded, measure.StageKernel, measure.StageHandover, measure.StageInit, measure.StageStore, measure.StageState, measure.StageReady},
			{measure.StageState, measure.StageService},
		} {
			for i := 1; i < len(chain); i++ {
				if a, b := median[chain[i-1]], median[chain[i]]; b < a {
					t.Errorf("stage %s at %.1f ms comes before %s at %.1f ms", chain[i], b, chain[i-1], a)
				}
			}
		}
		if d := median[measure.StageReady] - median[measure.StageService]; d > 10 {
			t.Errorf("the service answered %.1f ms before it was marked ready: more than two of nvinit's 5 ms WaitFor polls", d)
		}
		if sp, ok := out.Ratios[measure.RatioSpread]; !ok || sp > 0.005 {
			t.Errorf("%s = %v (present %v): three boots on the device clock differ by more than 0.5 %%", measure.RatioSpread, sp, ok)
		}
	}
	// Across both measures: six boots, two at a time.
	for name, l := range lo {
		if h := hi[name]; l > 0 && (h-l)/l > 0.005 {
			t.Errorf("%s: %.2f to %.2f ms over two measures run at once: the device clock moved with the host's load", name, l, h)
		}
	}
}

// measure -h's examples write their charts where the README's
// `nvboot build -o out/demo` does not build: a chart file in out/demo made
// that build refuse the directory (issue 19, item 12).
func TestMeasureExamplesKeepOutDemoFree(t *testing.T) {
	for _, line := range strings.Split(measureExamples, "\n") {
		if strings.Contains(line, "-charts out/demo") || strings.Contains(line, "-work out/demo") {
			t.Errorf("measure -h example writes into out/demo: %s", strings.TrimSpace(line))
		}
	}
	if !strings.Contains(measureExamples, "-charts ") {
		t.Error("no -charts example left to check")
	}
}

// measure -profile boots each layout once more with initcall_debug and
// reports where that boot's time went: the kernel's phases in order, its
// initcalls named (System.map beside the kernel, as kernel-config/build.sh
// keeps it) and their durations, nvinit's marks and steps from the
// handover to the first answer, and what the profile itself cost.
func TestMeasureProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU four times")
	}
	kernel := os.Getenv("NVBOOT_KERNEL")
	if kernel == "" {
		t.Skip("NVBOOT_KERNEL is not set (make test sets it)")
	}
	work := filepath.Join(t.TempDir(), "work")
	stdout, stderr, err := execute("measure", "-clock", "device", "-layouts", "off2f", "-runs", "1", "-storage", "sd", "-json", "-profile", "-work", work)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var out struct {
		Results []json.RawMessage                `json:"results"`
		Profile map[string]measure.ProfileOutput `json:"profile"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	p, ok := out.Profile["off2f"]
	if !ok || len(out.Results) == 0 {
		t.Fatalf("no off2f profile, or no results: %s", stdout)
	}
	if len(p.Kernel) < 4 || p.NCalls < 100 || len(p.Initcalls) != measure.ProfileTop {
		t.Errorf("kernel %+v, %d initcalls, %d shown: want its phases and the kernel's initcalls", p.Kernel, p.NCalls, len(p.Initcalls))
	}
	for i := 1; i < len(p.Kernel); i++ {
		if p.Kernel[i].At < p.Kernel[i-1].At || p.Kernel[i].MS < 0 {
			t.Errorf("kernel phases out of order: %+v", p.Kernel)
		}
	}
	_, err = os.Stat(filepath.Join(filepath.Dir(kernel), "System.map"))
	for _, c := range p.Initcalls {
		if c.MS <= 0 || c.At <= 0 || c.At > p.Kernel[len(p.Kernel)-1].At+1 {
			t.Errorf("initcall %+v: want a duration, ending before the handover", c)
		}
		if err == nil && strings.HasPrefix(c.Name, "0x") {
			t.Errorf("initcall %s named by its address, with a System.map beside the kernel", c.Name)
		}
	}
	var steps []string
	for _, s := range p.Init {
		steps = append(steps, s.Name)
	}
	for _, want := range []string{"kernel-handover", "init", "kernel-mounts", "handover-marks", "store-mounted", "store", "state", "network", "service-start:kv", "answered:8080"} {
		if !slices.Contains(steps, want) {
			t.Errorf("nvinit's marks and steps %v lack %s", steps, want)
		}
	}
	if _, ok := p.Cost[measure.StageService]; !ok {
		t.Errorf("no cost of the profile: %+v", p.Cost)
	}
	if b, err := os.ReadFile(filepath.Join(work, "profile-off2f.console")); err != nil || !strings.Contains(string(b), "NVBOOT-KMSG") {
		t.Errorf("the profiled boot's console is not kept in the work directory: %v", err)
	}
}
