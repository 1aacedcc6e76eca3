package nvbootcmd

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/measure"
	"github.com/nvboot/nvboot/host/vm"
)

// The device clock makes boot time a regression check: three cold boots of
// the demo on the instruction-counted clock must put every stage in boot
// order and agree with each other. The bound on their spread (10 %) is
// loose enough for a busy machine (the disk's waits are on the host's
// clock); the benchmark's own figure is 2 % (docs/BENCHMARKS.md). No
// absolute time is asserted: that is the benchmark's job, not a test's.
func TestMeasureDeviceClock(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU four times")
	}
	if os.Getenv("NVBOOT_KERNEL") == "" {
		t.Skip("NVBOOT_KERNEL is not set (make test sets it)")
	}
	stdout, stderr, err := execute("measure", "-clock", "device", "-layouts", "off2f", "-runs", "3", "-storage", "sd", "-json")
	if err != nil {
		t.Fatalf("measure: %v\n%s", err, stderr)
	}
	var out struct {
		Env     map[string]string  `json:"env"`
		Ratios  map[string]float64 `json:"ratios"`
		Results []struct {
			Name   string  `json:"name"`
			Median float64 `json:"median"`
			Runs   int     `json:"runs"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("output %q: %v", stdout, err)
	}
	if out.Env["clock"] != vm.ClockDevice || out.Env["cpu_rate"] != "1000000000" || out.Env["accel"] != "tcg" {
		t.Errorf("env %v: want the device clock at 1e9 under tcg", out.Env)
	}
	median := map[string]float64{}
	for _, r := range out.Results {
		if name, ok := strings.CutPrefix(r.Name, "off2f."); ok {
			median[name] = r.Median
			if r.Runs != 3 {
				t.Errorf("%s: %d runs, want 3", r.Name, r.Runs)
			}
		}
	}
	for _, st := range measure.Stages {
		if _, ok := median[st]; !ok {
			t.Errorf("stage %s missing from %v", st, median)
		}
	}
	// Boot order. ready and service are both after state but not ordered
	// between them: nvinit polls WaitFor every 5 ms and the answer every
	// 1 ms, so the first answer can be marked before the readiness.
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
	// The readiness mark can trail the answer by one 5 ms poll plus that
	// poll's dial and its hand-over to nvinit's main loop, which share the
	// guest's CPU with the starting service (5.6 ms seen in CI): two polls
	// bound it.
	if d := median[measure.StageReady] - median[measure.StageService]; d > 10 {
		t.Errorf("the service answered %.1f ms before it was marked ready: more than two of nvinit's 5 ms WaitFor polls", d)
	}
	sp, ok := out.Ratios[measure.RatioSpread]
	if !ok || sp > 0.10 {
		t.Errorf("%s = %v (present %v): three boots on the device clock differ by more than 10 %%\n%s", measure.RatioSpread, sp, ok, stderr)
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
