package benchjson

import "testing"

func TestStats(t *testing.T) {
	for _, c := range []struct {
		vs   []float64
		want Result
	}{
		{nil, Result{Name: "x", Unit: "ms"}},
		{[]float64{3, 1, 2}, Result{Name: "x", Unit: "ms", Median: 2, Min: 1, Max: 3, Runs: 3}},
		{[]float64{4, 1, 2, 3}, Result{Name: "x", Unit: "ms", Median: 2.5, Min: 1, Max: 4, Runs: 4}},
	} {
		in := append([]float64(nil), c.vs...)
		if got := Stats("x", "ms", c.vs); got != c.want {
			t.Errorf("Stats(%v) = %+v, want %+v", c.vs, got, c.want)
		}
		for i := range in {
			if in[i] != c.vs[i] {
				t.Fatal("Stats reordered its input")
			}
		}
	}
}

func TestAdoptGuestRatios(t *testing.T) {
	o := Output{Ratios: map[string]float64{"x_vs_y": 2}}
	o.AdoptGuestRatios(map[string]float64{"x_vs_y": 0.5})
	if len(o.Ratios) != 2 || o.Ratios["x_vs_y"] != 0.5 || o.Ratios["host_x_vs_y"] != 2 {
		t.Fatalf("ratios %v", o.Ratios)
	}
}
