package bootmark

import (
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	for _, m := range []Mark{
		{Name: Init, Uptime: 812345 * time.Microsecond},
		{Name: ServiceReady, Arg: "kv", Uptime: 2 * time.Second},
		{Name: Store, Uptime: 0},
	} {
		got, ok := Parse(Format(m))
		if !ok || got != m {
			t.Errorf("Parse(Format(%+v)) = %+v, %v", m, got, ok)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
		want Mark
	}{
		{"[    1.2] some kernel text NVBOOT-MARK init 1200\r", true, Mark{Name: "init", Uptime: 1200 * time.Microsecond}},
		{"NVBOOT-MARK service-ready kv 5", true, Mark{Name: "service-ready", Arg: "kv", Uptime: 5 * time.Microsecond}},
		{"NVBOOT-MARK init", false, Mark{}},
		{"NVBOOT-MARK init -5", false, Mark{}},
		{"NVBOOT-MARK init 12x", false, Mark{}},
		{"NVBOOT-MARK a b c 1", false, Mark{}},
		{"NVBOOT-MARK in/it 1", false, Mark{}},
		{"no marker here", false, Mark{}},
		{"", false, Mark{}},
		{"NVBOOT-MARK", false, Mark{}},
		{"NVBOOT-MARK init x", false, Mark{}},
		{"NVBOOT-MARKinit 1", false, Mark{}},
		{"nvinit: NVBOOT-MARK", false, Mark{}},
	} {
		got, ok := Parse(tc.line)
		if ok != tc.ok || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("NVBOOT-MARK service-ready kv 900000")
	f.Add("[ 0.1] NVBOOT-MARK init 1")
	f.Fuzz(func(t *testing.T, line string) {
		m, ok := Parse(line)
		if !ok {
			return
		}
		// What parses formats to a line that parses the same.
		if again, ok := Parse(Format(m)); !ok || again != m {
			t.Fatalf("%q: %+v does not survive Format/Parse: %+v %v", line, m, again, ok)
		}
	})
}

func TestPlace(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	tl := Place([]Stamped{
		{At: ms(1300), Mark: Mark{Name: Init, Uptime: ms(1000)}},                    // 300 ms late-ish
		{At: ms(1250), Mark: Mark{Name: Store, Uptime: ms(1010)}},                   // bound 240: the best
		{At: ms(2400), Mark: Mark{Name: ServiceReady, Arg: "kv", Uptime: ms(2100)}}, // bound 300
		{At: ms(2500), Mark: Mark{Name: ServiceReady, Arg: "kv", Uptime: ms(2200)}}, // a second one: ignored
	})
	if tl.KernelStart != ms(240) {
		t.Errorf("kernel start %v, want 240ms", tl.KernelStart)
	}
	if got := tl.Stages["service-ready:kv"]; got != ms(2340) {
		t.Errorf("service ready at %v, want 2.34s", got)
	}
	if got := tl.Stages["init"]; got != ms(1240) {
		t.Errorf("init at %v, want 1.24s", got)
	}
}

func TestPlaceGuest(t *testing.T) {
	ms := time.Millisecond
	marks := []Mark{
		// The kernel log's clock read 42 ms when the TSC said 100 ms since
		// power-on.
		{Name: Handover, Uptime: 40 * ms},
		{Name: KmsgTSC, Arg: "100000000", Uptime: 42 * ms},
		{Name: Init, Uptime: 121 * ms},
		// CLOCK_BOOTTIME runs 20 ms ahead of the log's clock.
		{Name: TSC, Arg: "100500000", Uptime: 62500 * time.Microsecond},
		{Name: Answered, Arg: "8080", Uptime: 150 * ms},
		{Name: Init, Uptime: 500 * ms}, // a second init (a re-exec) does not move the first
	}
	tl, err := PlaceGuest(marks)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]time.Duration{Handover: 98 * ms, Init: 159 * ms, "answered:8080": 188 * ms} {
		if got := tl.Stages[k]; got != want {
			t.Errorf("%s at %v, want %v", k, got, want)
		}
	}
	tsc := Mark{Name: TSC, Arg: "100000000", Uptime: 5 * ms}
	for _, bad := range [][]Mark{
		{{Name: Init, Uptime: ms}},
		{tsc},
		{tsc, {Name: KmsgTSC, Arg: "x1", Uptime: 5 * ms}},
		{tsc, {Name: KmsgTSC, Arg: "-1", Uptime: 5 * ms}},
	} {
		if _, err := PlaceGuest(bad); err == nil {
			t.Errorf("PlaceGuest(%+v): no error", bad)
		}
	}
}

// Unstamped keeps the marks and their order, dropping the arrival times.
func TestUnstamped(t *testing.T) {
	ss := []Stamped{{At: 5, Mark: Mark{Name: Handover}}, {At: 9, Mark: Mark{Name: Init}}}
	if got := Unstamped(ss); len(got) != 2 || got[0].Name != Handover || got[1].Name != Init {
		t.Errorf("Unstamped: %+v", got)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		{At: 38056 * time.Microsecond, Text: "initcall sched_clock_init_late+0x0/0x90 returned 0 after 14 usecs"},
		{At: 0, Text: ""},
		{At: time.Second, Text: "two  spaces kept"},
	} {
		got, ok := ParseRecord(FormatRecord(r))
		if !ok || got != r {
			t.Errorf("ParseRecord(FormatRecord(%+v)) = %+v, %v", r, got, ok)
		}
	}
	for _, bad := range []string{"NVBOOT-KMSG", "NVBOOT-KMSG x text", "NVBOOT-KMSG -1 text", "no record", "NVBOOT-KMSG 99999999999999999999 t"} {
		if r, ok := ParseRecord(bad); ok {
			t.Errorf("ParseRecord(%q) = %+v, want no record", bad, r)
		}
	}
	if r, ok := ParseRecord("[ 1.0] noise NVBOOT-KMSG 12 calling  foo @ 1\r"); !ok || r.At != 12*time.Microsecond || r.Text != "calling  foo @ 1" {
		t.Errorf("a record after other text: %+v, %v", r, ok)
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add("NVBOOT-KMSG 38056 initcall foo returned 0 after 14 usecs")
	f.Add("x NVBOOT-KMSG 1 ")
	f.Fuzz(func(t *testing.T, line string) {
		r, ok := ParseRecord(line)
		if !ok {
			return
		}
		if again, ok := ParseRecord(FormatRecord(r)); !ok || again != r {
			t.Fatalf("%q: %+v does not survive FormatRecord/ParseRecord: %+v %v", line, r, again, ok)
		}
	})
}
