package measure

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/vm"
)

// densityRun is a run of n guests, each QEMU costing own MiB (tcg of it its
// translation cache, ram its guest's RAM), sharing files of shared MiB.
func densityRun(l appliance.Layout, start string, n int, own, tcg, ram, shared float64) *DensityRun {
	r := &DensityRun{Layout: l, Start: start, N: n, Shared: map[string]int64{"pmem-text.img": int64(shared * (1 << 20))}}
	for i := 0; i < n; i++ {
		r.QEMUs = append(r.QEMUs, qemuMemory{Pss: int64(own * (1 << 20)), TCGPss: int64(tcg * (1 << 20)), RAMPss: int64(ram * (1 << 20))})
		r.Answers = append(r.Answers, time.Duration(i+1)*time.Second)
	}
	r.AllAnswered = time.Duration(n) * time.Second
	return r
}

func testDensityReport() *DensityReport {
	r := &DensityReport{Machine: Machine{Clock: vm.ClockWall}, Accel: "tcg", MemMiB: 256, Settle: DefaultSettle,
		Layouts: []appliance.Layout{appliance.OFF2F, appliance.ELF, appliance.DAXELF}, Counts: []int{1, 8},
		Starts: []string{StartStaggered, StartBurst}}
	for _, start := range r.Starts {
		for _, n := range r.Counts {
			r.Runs = append(r.Runs,
				densityRun(appliance.OFF2F, start, n, 100, 60, 30, 40),
				densityRun(appliance.ELF, start, n, 160, 60, 90, 20),
				densityRun(appliance.DAXELF, start, n, 110, 60, 35, 80))
		}
	}
	return r
}

// Host memory per appliance is each QEMU's own share plus the shared
// files once over N; the ratios are named as the issue names them, from
// the staggered runs, the burst ones and the ones without TCG beside.
func TestDensityFigures(t *testing.T) {
	r := testDensityReport()
	off8 := r.Run(appliance.OFF2F, StartStaggered, 8)
	if got, want := off8.PerAppliance(), 100+40.0/8; got != want {
		t.Errorf("off2f, 8: %.3f MiB an appliance, want %.3f", got, want)
	}
	if got, want := off8.PerApplianceNoTCG(), 40+40.0/8; got != want {
		t.Errorf("off2f, 8, no TCG: %.3f MiB, want %.3f", got, want)
	}
	if got, want := off8.PerApplianceGuest(), 30+40.0/8; got != want {
		t.Errorf("off2f, 8, the guests alone: %.3f MiB, want %.3f", got, want)
	}
	rat := r.Ratios()
	for name, want := range map[string]float64{
		"density_8.off2f_vs_elf":              round(105.0/162.5, 3),
		"density_1.off2f_vs_elf":              round(140.0/180, 3),
		"density_8.off2f_vs_daxelf":           round(105.0/120, 3),
		"density_8.burst.off2f_vs_elf":        round(105.0/162.5, 3),
		"density_8.no_tcg.off2f_vs_elf":       round(45.0/102.5, 3),
		"density_8.no_tcg.burst.off2f_vs_elf": round(45.0/102.5, 3),
		"density_8.guest.off2f_vs_elf":        round(35.0/92.5, 3),
		"density_1.guest.burst.off2f_vs_elf":  round(70.0/110, 3),
	} {
		if got, ok := rat[name]; !ok || got != want {
			t.Errorf("ratio %s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if len(rat) != 2*2*2*3 {
		t.Errorf("%d ratios, want 24: %v", len(rat), rat)
	}
	names := map[string]int{}
	for _, res := range r.Results() {
		names[res.Name] = res.Runs
	}
	for name, runs := range map[string]int{
		"density_8.off2f.staggered.host_mib_per_appliance": 1, "density_8.elf.burst.answer_ms": 8,
		"density_8.dax-elf.staggered.qemu_own_mib": 8, "density_1.off2f.burst.shared_files_mib": 1,
		"density_8.off2f.staggered.tcg_cache_mib": 8, "density_8.off2f.staggered.all_answered_ms": 1,
		"density_8.off2f.staggered.vmm_mib": 8, "density_8.elf.burst.guest_mib_per_appliance": 1,
	} {
		if names[name] != runs {
			t.Errorf("result %s: %d runs, want %d", name, names[name], runs)
		}
	}
	o := r.Output()
	if o.Bench != DensityBench || o.Env["clock"] != vm.ClockWall || !strings.Contains(o.Env["times"], "host's load") {
		t.Errorf("output %s, env %v", o.Bench, o.Env)
	}
	var tab bytes.Buffer
	if err := r.WriteTable(&tab); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"staggered", "burst", "105.0 (45.0)", "density_8.off2f_vs_elf"} {
		if !strings.Contains(tab.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tab.String())
		}
	}
}

// The chart is well-formed SVG with a line per layout and start and a
// point per run.
func TestDensityChart(t *testing.T) {
	r := testDensityReport()
	svg := r.Chart("test")
	d := xml.NewDecoder(bytes.NewReader(svg))
	lines, points := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "polyline":
				lines++
			case "circle":
				points++
			}
		}
	}
	if lines != 6 || points != 12 {
		t.Errorf("%d lines and %d points, want 6 and 12", lines, points)
	}
}

// RunDensity refuses what it cannot measure before it builds anything.
func TestRunDensityRefuses(t *testing.T) {
	ok := DensityOptions{Layouts: []appliance.Layout{appliance.OFF2F}, Counts: []int{1}, Starts: []string{StartBurst}, Machine: Machine{Clock: vm.ClockWall}}
	for name, tc := range map[string]struct {
		change func(*DensityOptions)
		want   string
	}{
		"device clock": {func(o *DensityOptions) { o.Machine.Clock = vm.ClockDevice }, "wall clock"},
		"no N":         {func(o *DensityOptions) { o.Counts = nil }, "no number of guests"},
		"zero guests":  {func(o *DensityOptions) { o.Counts = []int{0} }, "0 guests"},
		"start":        {func(o *DensityOptions) { o.Starts = []string{"slow"} }, `start "slow"`},
		"no layout":    {func(o *DensityOptions) { o.Layouts = nil }, "no layout"},
	} {
		o := ok
		tc.change(&o)
		if _, err := RunDensity(context.Background(), o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}
