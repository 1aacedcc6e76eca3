package nvbootcmd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/format/benchjson"
)

// TestMeasureDensity: one guest of the demo's off2f image, then two at once,
// every one mapping the image's text store from one host file. Each of the
// two answers; the guests map some of the store, and the host keeps every
// page they map; the shared files are counted once, so two guests cost less
// an appliance than one, and the shared files no more than one guest's and
// a half; each QEMU's own memory is there. No time is asserted: under TCG
// with N guests it is the host's load.
func TestMeasureDensity(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU four times")
	}
	if os.Getenv("NVBOOT_KERNEL") == "" {
		t.Skip("NVBOOT_KERNEL is not set (make test sets it)")
	}
	charts := t.TempDir()
	stdout, stderr, err := execute("measure", "-density", "1,2", "-layouts", "off2f", "-start", "staggered", "-storage", "sd", "-json",
		"-charts", charts, "-work", filepath.Join(t.TempDir(), "work"))
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var out benchjson.Output
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	res := map[string]benchjson.Result{}
	for _, r := range out.Results {
		res[r.Name] = r
	}
	get := func(name string) benchjson.Result {
		t.Helper()
		r, ok := res[name]
		if !ok {
			t.Fatalf("no result %s in %s", name, stdout)
		}
		return r
	}
	if out.Bench != "measure-density" || out.Env["clock"] != "wall" || !strings.Contains(out.Env["pmem"], "read-only") {
		t.Errorf("bench %q, env %v", out.Bench, out.Env)
	}
	for _, n := range []int{1, 2} {
		p := fmt.Sprintf("density_%d.off2f.staggered.", n)
		if a := get(p + "answer_ms"); a.Runs != n || a.Min <= 0 {
			t.Errorf("%sanswer_ms %+v: want an answer from each of %d guests", p, a, n)
		}
		if q := get(p + "qemu_own_mib"); q.Min <= 0 {
			t.Errorf("%sqemu_own_mib %+v: a QEMU costs nothing?", p, q)
		}
		// Under TCG each guest's translation cache is capped (QEMU's
		// default grew to about 94 MiB in this boot).
		if c := get(p + "tcg_cache_mib"); out.Env["accel"] == "tcg" && (out.Env["tcg_tb_size_mib"] != "16" || c.Max > 16.5) {
			t.Errorf("%stcg_cache_mib %+v with tcg_tb_size_mib %q in the env: want at most the 16 MiB asked for", p, c, out.Env["tcg_tb_size_mib"])
		}
		m, kept := get(p+"shared_mapped_mib").Median, get(p+"shared_files_mib").Median
		if m <= 0 || kept < m-0.2 {
			t.Errorf("%s: the guests map %.1f MiB of the shared files, the host keeps %.1f: want some mapped, and every mapped page kept", p, m, kept)
		}
	}
	one, two := get("density_1.off2f.staggered.host_mib_per_appliance").Median, get("density_2.off2f.staggered.host_mib_per_appliance").Median
	if two >= one {
		t.Errorf("two guests cost %.1f MiB an appliance, one %.1f: the shared pages are not counted once", two, one)
	}
	for _, f := range []string{"shared_files_mib", "shared_mapped_mib"} {
		s1, s2 := get("density_1.off2f.staggered."+f).Median, get("density_2.off2f.staggered."+f).Median
		if s2 > 1.5*s1 {
			t.Errorf("%s: %.1f MiB for two guests, %.1f for one: the second guest's pages of the shared files are not the first's", f, s2, s1)
		}
	}
	if b, err := os.ReadFile(filepath.Join(charts, "measure-density.svg")); err != nil || !strings.Contains(string(b), "<polyline") {
		t.Errorf("no density chart: %v", err)
	}
}

// Two configs' density charts can share a directory.
func TestDensityChartName(t *testing.T) {
	for cfg, want := range map[string]string{"": "measure-density.svg", "examples/big.json": "measure-density-big.svg", "x/kv": "measure-density-kv.svg"} {
		if got := densityChartName(cfg); got != want {
			t.Errorf("config %q: chart %s, want %s", cfg, got, want)
		}
	}
}
