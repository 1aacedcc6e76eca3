package measure

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm"
)

// The ratios, the spread and the results of two layouts' runs, and the
// table that prints them.
func TestReport(t *testing.T) {
	boot := func(service, handover time.Duration) *Boot {
		return &Boot{Stages: map[string]time.Duration{StageKernel: 100 * time.Millisecond,
			StageHandover: handover, StageInit: handover + 10*time.Millisecond, StageService: service}}
	}
	r := &Report{Storage: vm.Storage{Name: "sd"}, Accel: "tcg", Layouts: []appliance.Layout{appliance.OFF2F, appliance.ELF},
		Runs: map[appliance.Layout][]*Boot{
			appliance.OFF2F: {boot(1000*time.Millisecond, 800*time.Millisecond), boot(1200*time.Millisecond, 800*time.Millisecond), boot(1100*time.Millisecond, 800*time.Millisecond)},
			appliance.ELF:   {boot(2200*time.Millisecond, 800*time.Millisecond), boot(2000*time.Millisecond, 800*time.Millisecond), boot(2400*time.Millisecond, 800*time.Millisecond)},
		}}
	rat := r.Ratios()
	if got := rat["power_on_to_service.off2f_vs_elf"]; got != 0.5 {
		t.Errorf("power_on_to_service.off2f_vs_elf = %v, want 1100/2200", got)
	}
	if got := rat["init_to_service.off2f_vs_elf"]; got != 0.214 {
		t.Errorf("init_to_service.off2f_vs_elf = %v, want 300/1400 rounded", got)
	}
	if got := rat[RatioSpread]; got != 0.1818 {
		t.Errorf("%s = %v, want (1200-1000)/1100 rounded: the worst stage over both layouts", RatioSpread, got)
	}
	var found bool
	for _, res := range r.Results() {
		if res.Name == "elf.service" {
			found = res.Median == 2200 && res.Min == 2000 && res.Max == 2400 && res.Runs == 3 && res.Unit == "ms"
		}
	}
	if !found {
		t.Errorf("elf.service result missing or wrong: %+v", r.Results())
	}
	var tab bytes.Buffer
	if err := r.WriteTable(&tab); err != nil || !strings.Contains(tab.String(), "power_on_to_service.off2f_vs_elf") {
		t.Errorf("table: %v\n%s", err, tab.String())
	}
	// The env names the board's pmem and ACPI: e820 regions with ACPI off
	// on the pc board; the virt board's device-tree regions and no ACPI,
	// whatever -pmem said.
	r.Machine.PmemAs = vm.PmemE820
	r.Images = map[appliance.Layout]*appliance.Image{appliance.OFF2F: {Target: config.TargetPC}, appliance.ELF: {Target: config.TargetPC}}
	if e := r.Env(); e["pmem"] != vm.PmemE820 || e["acpi"] != "off" || e["arch"] != "" {
		t.Errorf("pc board's env: %v", e)
	}
	r.Images[appliance.OFF2F].Target, r.Images[appliance.ELF].Target = config.TargetVirt, config.TargetVirt
	if e := r.Env(); !strings.Contains(e["pmem"], "device-tree") || !strings.HasPrefix(e["acpi"], "none") || e["arch"] != "arm64" {
		t.Errorf("virt board's env: %v", e)
	}
	if svg := string(r.Chart("t", appliance.OFF2F)); !strings.HasPrefix(svg, "<svg") || !strings.Contains(svg, "ready") && !strings.Contains(svg, "service") {
		t.Errorf("chart: %s", svg)
	}
}
