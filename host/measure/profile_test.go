package measure

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/format/bootmark"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/vm"
)

// profileConsole is a profiled boot's console: the kernel log as nvinit
// dumps it (kernel without kallsyms: initcalls by address), its step marks.
func profileConsole() string {
	rec := func(us int64, text string) string {
		return bootmark.FormatRecord(bootmark.Record{At: time.Duration(us) * time.Microsecond, Text: text}) + "\n"
	}
	return rec(0, "Linux version 6.1.192") +
		rec(20000, "calling  0xffffffff81001000 @ 1") +
		// Before the switch the kernel times it in whole ticks: 4000 µs
		// where its log's stamps say 300.
		rec(20300, "initcall 0xffffffff81001000 returned 0 after 4000 usecs") +
		rec(20400, "calling  0xffffffff81002000 @ 1") +
		rec(23400, "initcall 0xffffffff81002000 returned 0 after 0 usecs") +
		rec(23500, "clocksource: Switched to clocksource tsc-early") +
		rec(23600, "calling  inet_init+0x0/0x2a0 @ 1") +
		rec(25100, "initcall inet_init+0x0/0x2a0 returned 0 after 1460 usecs") +
		rec(26000, "probe of pfn0.1 returned 0 after 2050 usecs") +
		rec(26100, "calling  0xffffffff81003000 @ 1") +
		rec(30000, "initcall 0xffffffff81003000 returned -19 after 50 usecs") +
		rec(36000, "Run /sbin/nvinit as init process") +
		"NVBOOT-MARK step kernel-mounts 41000\n"
}

func TestParseProfile(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	b := &Boot{Stages: map[string]time.Duration{StageLoaded: ms(8), StageKernel: ms(8), StageHandover: ms(46)}}
	marks := map[string]time.Duration{
		bootmark.Handover: ms(46), bootmark.Init: ms(51), "step:kernel-mounts": ms(51.3), "step:handover-marks": ms(54),
		bootmark.TSC + ":123": ms(52), bootmark.KmsgTSC + ":456": ms(52), bootmark.Store: ms(58),
		bootmark.ServiceStart + ":kv": ms(60), bootmark.Answered + ":8080": ms(70),
	}
	syms := parseSymbols(strings.NewReader("ffffffff81001000 t cpu_stop_init\nffffffff81002000 T param_sysfs_init\nffffffff81002000 t alias\nffffffff81003000 D not_text\n"))
	// The log's clock started 2 ms after the kernel: logBase is 10 ms.
	p := parseProfile(b, profileConsole(), ms(10), marks, syms)

	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	want := []Call{
		{"initcall", "param_sysfs_init", us(33400), us(3000), 0},   // from the stamps: before the switch
		{"probe", "pfn0.1", us(36000), us(2050), 0},                // probes: the kernel's own figure
		{"initcall", "inet_init", us(35100), us(1460), 0},          // after the switch: the kernel's figure
		{"initcall", "cpu_stop_init", us(30300), us(300), 0},       // a tick's 4000 µs not believed
		{"initcall", "0xffffffff81003000", us(40000), us(50), -19}, // no text symbol there: its address
	}
	if len(p.Calls) != len(want) {
		t.Fatalf("calls %+v, want %+v", p.Calls, want)
	}
	for i, c := range p.Calls {
		if c != want[i] {
			t.Errorf("call %d: %+v, want %+v", i, c, want[i])
		}
	}
	if p.NCalls != 4 || p.CallsSum != us(3000+1460+300+50) {
		t.Errorf("%d initcalls, %v in all", p.NCalls, p.CallsSum)
	}
	for i, w := range []struct {
		name     string
		at, took float64
	}{
		{"the kernel loaded", 8, 8},
		{"the kernel entered", 8, 0},
		{"entry to its log clock", 10, 2},
		{"before the first initcall", 30, 20},
		{"initcalls", 40, 10},
		{"init run", 46, 6}, // the last initcall to the handover record
	} {
		if i >= len(p.Kernel) || !strings.Contains(p.Kernel[i].Name, w.name) || p.Kernel[i].At != ms(w.at) || p.Kernel[i].Took != ms(w.took) {
			t.Errorf("kernel span %d: %+v, want %q at %v ms, %v ms", i, p.Kernel, w.name, w.at, w.took)
			break
		}
	}
	var init []string
	for _, s := range p.Init {
		init = append(init, s.Name)
	}
	if got := strings.Join(init, " "); got != "kernel-handover init kernel-mounts handover-marks store service-start:kv answered:8080" {
		t.Errorf("nvinit's marks and steps: %s (the tie marks left out, steps by name, in time order)", got)
	}
	if p.Init[2].Took != ms(0.3) || p.Init[0].Took != 0 {
		t.Errorf("times since the mark before: %+v", p.Init)
	}
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "by address") {
		t.Errorf("notes %q: want one saying some initcalls are named by address", p.Notes)
	}

	// A log whose start was overwritten says so; no records at all says
	// nvinit printed no profile.
	lost := parseProfile(b, strings.SplitN(profileConsole(), "\n", 2)[1], ms(10), marks, syms)
	if len(lost.Notes) == 0 || !strings.Contains(lost.Notes[0], "overflowed") {
		t.Errorf("a log without its first record: notes %q", lost.Notes)
	}
	none := parseProfile(b, "", ms(10), marks, nil)
	if len(none.Kernel) != 0 || len(none.Notes) != 1 || !strings.Contains(none.Notes[0], "no kernel log") {
		t.Errorf("no records: kernel %+v, notes %q", none.Kernel, none.Notes)
	}
}

// The profile goes out as text after the table and under "profile" in the
// JSON, with what it costs against the measured boots.
func TestProfileOutput(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	measured := &Boot{Stages: map[string]time.Duration{StageLoaded: ms(8), StageKernel: ms(8), StageHandover: ms(46), StageService: ms(80)}}
	profiled := &Boot{Stages: map[string]time.Duration{StageLoaded: ms(8), StageKernel: ms(8), StageHandover: ms(49), StageService: ms(85.5)}}
	r := &Report{Storage: vm.Storage{Name: "sd", About: "SD card"}, Machine: Machine{Clock: vm.ClockDevice, CPURate: 1e9},
		Layouts: []appliance.Layout{appliance.OFF2F}, Runs: map[appliance.Layout][]*Boot{appliance.OFF2F: {measured}}}
	r.Profiles = map[appliance.Layout]*Profile{appliance.OFF2F: parseProfile(profiled, profileConsole(), ms(10),
		map[string]time.Duration{bootmark.Handover: ms(49), bootmark.Init: ms(54)}, nil)}
	cost, ok := r.ProfileCost(appliance.OFF2F)
	if !ok || cost[StageHandover] != 3 || cost[StageService] != 5.5 {
		t.Errorf("cost %v, %v; want the handover +3 ms, the service +5.5 ms", cost, ok)
	}
	var text bytes.Buffer
	if err := r.WriteProfiles(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"profile of off2f", "+3.0 ms", "+5.5 ms", "inet_init", "kernel: initcalls", "init "} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
	b, err := json.Marshal(r.Output())
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Bench   string                   `json:"bench"`
		Profile map[string]ProfileOutput `json:"profile"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	p, ok := out.Profile["off2f"]
	if out.Bench != "measure" || !ok || p.Cmdline != ProfileCmdline || p.NCalls != 4 || len(p.Initcalls) != 5 ||
		p.Initcalls[0].Name != "0xffffffff81002000" || p.Cost[StageService] != 5.5 || len(p.Kernel) == 0 || len(p.Init) != 2 {
		t.Errorf("JSON profile: %s", b)
	}
	r.Profiles = nil
	if b, _ := json.Marshal(r.Output()); bytes.Contains(b, []byte(`"profile"`)) {
		t.Errorf("a measure without -profile has a profile key: %s", b)
	}
}
