package main

import (
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/vm"
)

func TestScaleShift(t *testing.T) {
	for _, c := range []struct {
		n     int
		shift int
		ok    bool
	}{{2, 1, true}, {16, 4, true}, {512, 9, true}, {0, 0, false}, {1, 0, false}, {12, 0, false}, {1024, 0, false}, {-4, 0, false}} {
		shift, err := scaleShift(c.n)
		if (err == nil) != c.ok || (c.ok && shift != c.shift) {
			t.Errorf("scaleShift(%d) = %d, %v; want %d, ok %v", c.n, shift, err, c.shift, c.ok)
		}
	}
	sd, err := vm.Profile("sd")
	if err != nil {
		t.Fatal(err)
	}
	if s := scaled(sd, 16); s.ReadBPS != sd.ReadBPS/16 || s.ReadIOPS != sd.ReadIOPS/16 || s.WriteBPS != sd.WriteBPS/16 {
		t.Errorf("scaled(sd, 16) = %+v", s)
	}
	if g := lateRE.FindStringSubmatch("Warning: The guest is now late by 3.0 to 4.0 seconds"); g == nil || g[2] != "4.0" {
		t.Errorf("late warning not read: %q", g)
	}
}

// Medians per layout and span, the lateness kept as its own figure, and
// off2f's ratio to every other layout, named under "<size>.scaled.".
func TestScaledResults(t *testing.T) {
	ms := time.Millisecond
	by := map[string][]scaledBoot{
		"off2f": {{PowerOn: 500 * ms, Init: 250 * ms, Late: 2}, {PowerOn: 520 * ms, Init: 260 * ms, Late: 7}, {PowerOn: 510 * ms, Init: 255 * ms}},
		"elf":   {{PowerOn: 1500 * ms, Init: 1250 * ms}, {PowerOn: 1700 * ms, Init: 1450 * ms}, {PowerOn: 1600 * ms, Init: 1350 * ms}},
	}
	res, ratios := scaledResults("big", []string{"off2f", "elf", "dax-elf"}, by)
	got := map[string]float64{}
	for _, r := range res {
		got[r.Name] = r.Median
	}
	for name, want := range map[string]float64{"big.scaled.off2f.power_on_to_service": 510, "big.scaled.elf.init_to_service": 1350,
		"big.scaled.off2f.late_max": 2} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v (%v)", name, got[name], want, got)
		}
	}
	if len(res) != 6 {
		t.Errorf("%d results, want 3 for each layout booted", len(res))
	}
	if ratios["big.scaled.power_on_to_service.off2f_vs_elf"] != 0.319 || ratios["big.scaled.init_to_service.off2f_vs_elf"] != 0.189 || len(ratios) != 2 {
		t.Errorf("ratios %v", ratios)
	}
}
