package measure

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/vm"
)

// boot fabricates a boot's marks, in ms since power-on, in Stages' order
// (0: no such mark).
func boot(loaded, kernel, handover, init, store, state, ready, service float64) *Boot {
	b := &Boot{Stages: map[string]time.Duration{}}
	for i, v := range []float64{loaded, kernel, handover, init, store, state, ready, service} {
		if v != 0 || Stages[i] == StageLoaded {
			b.Stages[Stages[i]] = time.Duration(v * float64(time.Millisecond))
		}
	}
	return b
}

// chartReport is three layouts whose charts test the corners:
//   - off2f: in runs 1 and 2 the service answers before it is marked ready,
//     in run 3 after, so the per-stage medians put ready after service (the
//     median of ready 154 ms, of service 150 ms);
//   - elf: its last stage is long and ends where the axis ends (4000 ms,
//     a tick), so its label has no room right of it;
//   - dax-elf: its last stage is short and ends there too, so its label
//     goes right of it, past the axis.
func chartReport() *Report {
	return &Report{Storage: vm.Storage{Name: "sd", About: "SD card"}, Accel: "tcg",
		Machine: Machine{Clock: vm.ClockDevice, CPURate: 1e9},
		Layouts: []appliance.Layout{appliance.OFF2F, appliance.ELF, appliance.DAXELF},
		Runs: map[appliance.Layout][]*Boot{
			appliance.OFF2F: {
				boot(0, 20, 60, 61, 70, 80, 104, 100),
				boot(0, 20, 60, 61, 70, 80, 154, 150),
				boot(0, 20, 60, 61, 70, 80, 200, 210),
			},
			appliance.ELF: {
				boot(30, 60, 900, 920, 0, 1500, 2400, 4100),
				boot(30, 60, 900, 920, 0, 1500, 2500, 4000),
				boot(30, 60, 900, 920, 0, 1500, 2400, 3900),
			},
			appliance.DAXELF: {boot(2, 60, 800, 820, 830, 840, 3997, 4000)},
		}}
}

// svgDoc is what the tests read back from a chart.
type svgDoc struct {
	w, h  float64
	bars  []svgBar
	calls []svgBar // the profile's initcalls: from the layout, to the name
	texts []svgText
}

type svgBar struct {
	layout, from, to string
	x, y, w, h       float64
}

type svgText struct {
	x, y, size     float64
	bold           bool
	anchor, string string
}

// parseSVG reads a chart as XML: the viewBox, the stage bars and the text.
func parseSVG(t *testing.T, svg []byte) svgDoc {
	t.Helper()
	var doc svgDoc
	dec := xml.NewDecoder(bytes.NewReader(svg))
	num := func(e xml.StartElement, name string) float64 {
		for _, a := range e.Attr {
			if a.Name.Local == name {
				v, err := strconv.ParseFloat(a.Value, 64)
				if err != nil {
					t.Fatalf("<%s %s=%q>: %v", e.Name.Local, name, a.Value, err)
				}
				return v
			}
		}
		return -1
	}
	attr := func(e xml.StartElement, name string) string {
		for _, a := range e.Attr {
			if a.Name.Local == name {
				return a.Value
			}
		}
		return ""
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v", err)
		}
		e, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch e.Name.Local {
		case "svg":
			f := strings.Fields(attr(e, "viewBox"))
			if len(f) != 4 || f[0] != "0" || f[1] != "0" {
				t.Fatalf("viewBox %q", attr(e, "viewBox"))
			}
			doc.w, _ = strconv.ParseFloat(f[2], 64)
			doc.h, _ = strconv.ParseFloat(f[3], 64)
			if num(e, "width") != doc.w || num(e, "height") != doc.h {
				t.Errorf("width and height are not the viewBox's")
			}
		case "rect":
			switch attr(e, "class") {
			case "stage":
				doc.bars = append(doc.bars, svgBar{attr(e, "data-layout"), attr(e, "data-from"), attr(e, "data-to"),
					num(e, "x"), num(e, "y"), num(e, "width"), num(e, "height")})
			case "initcall":
				doc.calls = append(doc.calls, svgBar{attr(e, "data-layout"), "", attr(e, "data-name"),
					num(e, "x"), num(e, "y"), num(e, "width"), num(e, "height")})
			}
		case "text":
			tx := svgText{x: num(e, "x"), y: num(e, "y"), size: chartFont, bold: attr(e, "font-weight") == "bold",
				anchor: attr(e, "text-anchor")}
			if s := num(e, "font-size"); s > 0 {
				tx.size = s
			}
			var s string
			if err := dec.DecodeElement(&s, &e); err != nil {
				t.Fatal(err)
			}
			tx.string = s
			doc.texts = append(doc.texts, tx)
		}
	}
	return doc
}

// Every bar and every label of the chart lies inside the picture: no bar
// starts left of it or runs past its right edge, no text is cut off (by
// its estimated width; the descent below the baseline a quarter of the
// size, the ascent its size).
func TestChartInsidePicture(t *testing.T) {
	profiled := chartReport()
	profiled.Profiles = map[appliance.Layout]*Profile{appliance.ELF: {Calls: []Call{
		{Kind: "probe", Name: "a-device-with-a-long-name.0", At: 890 * time.Millisecond, Took: 300 * time.Millisecond},
		{Kind: "initcall", Name: "f", At: 899 * time.Millisecond, Took: time.Millisecond}}}}
	for _, r := range []*Report{chartReport(), profiled} {
		insidePicture(t, r)
	}
}

func insidePicture(t *testing.T, r *Report) {
	for _, c := range []struct {
		name    string
		layouts []appliance.Layout
	}{{"all", nil}, {"off2f", []appliance.Layout{appliance.OFF2F}}, {"elf", []appliance.Layout{appliance.ELF}},
		{"dax-elf", []appliance.Layout{appliance.DAXELF}}} {
		t.Run(c.name, func(t *testing.T) {
			doc := parseSVG(t, r.Chart("nvboot measure: boot chart", c.layouts...))
			if len(doc.bars) == 0 || len(doc.texts) == 0 {
				t.Fatalf("%d bars, %d texts", len(doc.bars), len(doc.texts))
			}
			for _, b := range append(doc.bars, doc.calls...) {
				if b.x < 0 || b.w < 0 || b.y < 0 || b.h < 0 || b.x+b.w > doc.w || b.y+b.h > doc.h {
					t.Errorf("%s bar %s → %s at x %.1f, width %.1f: outside 0..%.0f", b.layout, b.from, b.to, b.x, b.w, doc.w)
				}
			}
			for _, tx := range doc.texts {
				w := TextWidth(tx.string, tx.size, tx.bold)
				left := tx.x
				switch tx.anchor {
				case "middle":
					left -= w / 2
				case "end":
					left -= w
				}
				if left < 0 || left+w > doc.w || tx.y-tx.size < 0 || tx.y+tx.size/4 > doc.h {
					t.Errorf("text %q spans x %.1f to %.1f, y %.1f: outside %.0f×%.0f", tx.string, left, left+w, tx.y, doc.w, doc.h)
				}
			}
		})
	}
}

// The bars of a layout are its median boot's stages in the order they
// happened, each starting where the one before ended, on one axis; a
// report whose per-stage medians are out of order (ready after service)
// still draws no bar backwards.
func TestChartBootOrder(t *testing.T) {
	r := chartReport()
	ready, _ := r.median(appliance.OFF2F, StageReady)
	service, _ := r.median(appliance.OFF2F, StageService)
	if ready <= service {
		t.Fatalf("the fabricated report's medians are in order (ready %.0f, service %.0f): it tests nothing", ready, service)
	}
	doc := parseSVG(t, r.Chart("t"))
	want := map[appliance.Layout][]string{
		// Run 2 (service at 150 ms) is off2f's median; it answered first.
		appliance.OFF2F: {StageLoaded, StageKernel, StageHandover, StageInit, StageStore, StageState, StageService, StageReady},
		// No store mark: the row is left out.
		appliance.ELF:    {StageLoaded, StageKernel, StageHandover, StageInit, StageState, StageReady, StageService},
		appliance.DAXELF: Stages,
	}
	got := map[appliance.Layout][]svgBar{}
	for _, b := range doc.bars {
		got[appliance.Layout(b.layout)] = append(got[appliance.Layout(b.layout)], b)
	}
	for l, stages := range want {
		bars := got[l]
		var to []string
		for i, b := range bars {
			to = append(to, b.to)
			from := "power-on"
			if i > 0 {
				from = bars[i-1].to
				// 0.1 px: the printed precision.
				if end := bars[i-1].x + bars[i-1].w; b.x < bars[i-1].x || b.x-end > 0.11 || end-b.x > 1.01 {
					t.Errorf("%s: bar %s → %s starts at %.1f, the one before spans %.1f to %.1f", l, b.from, b.to, b.x, bars[i-1].x, end)
				}
				if b.y <= bars[i-1].y {
					t.Errorf("%s: bar %s → %s is not below the one before", l, b.from, b.to)
				}
			}
			if b.from != from {
				t.Errorf("%s: bar %s → %s, want it from %s", l, b.from, b.to, from)
			}
		}
		if !slices.Equal(to, stages) {
			t.Errorf("%s: bars to %v, want %v", l, to, stages)
		}
	}
	for _, iv := range intervals(r.Runs[appliance.OFF2F][1]) {
		if iv.end < iv.start {
			t.Errorf("interval %s → %s runs backwards: %v to %v", iv.from, iv.to, iv.start, iv.end)
		}
	}
	// The lane groups' headings say which run each drew.
	var headings []string
	for _, tx := range doc.texts {
		if strings.Contains(tx.string, ": run ") {
			headings = append(headings, tx.string)
		}
	}
	if !slices.Equal(headings, []string{"off2f: run 2 of 3, service answered at 150 ms", "elf: run 2 of 3, service answered at 4000 ms",
		"dax-elf: run 1 of 1, service answered at 4000 ms"}) {
		t.Errorf("headings %q", headings)
	}
	// Both ends of the axis are ticks, in ms; and the clock is named.
	var all []string
	for _, tx := range doc.texts {
		all = append(all, tx.string)
	}
	for _, want := range []string{"0", "4000", "ms since power-on", "device clock, a 1-GIPS in-order core (QEMU TCG -icount); storage SD card"} {
		if !slices.Contains(all, want) {
			t.Errorf("no text %q in %q", want, all)
		}
	}
}

// A profiled layout's longest initcalls are rows right under its kernel →
// handover bar, in the order they started, each a bar from its start to
// its end on the chart's axis; a layout without a profile has none.
func TestChartProfileRows(t *testing.T) {
	r := chartReport()
	at := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	var calls []Call
	for i := range chartCalls + 2 {
		// Longest first, as parseProfile sorts them; the longest starts last.
		calls = append(calls, Call{Kind: "initcall", Name: "f" + strconv.Itoa(i), At: at(55 - float64(i)*4), Took: at(4 - float64(i)*0.4)})
	}
	r.Profiles = map[appliance.Layout]*Profile{appliance.OFF2F: {Calls: calls}}
	doc := parseSVG(t, r.Chart("t", appliance.OFF2F))
	if len(doc.calls) != chartCalls {
		t.Fatalf("%d initcall bars, want %d: %+v", len(doc.calls), chartCalls, doc.calls)
	}
	var handover, init svgBar
	for _, b := range doc.bars {
		if b.layout == string(appliance.OFF2F) && b.to == StageHandover {
			handover = b
		}
		if b.layout == string(appliance.OFF2F) && b.to == StageInit {
			init = b
		}
	}
	scale := handover.w / 40 // kernel → handover: 20 to 60 ms
	for i, c := range doc.calls {
		if c.layout != string(appliance.OFF2F) || c.y <= handover.y || c.y >= init.y {
			t.Errorf("initcall %s (%s) at y %.1f: want it under kernel → handover (%.1f) and above handover → init (%.1f)", c.to, c.layout, c.y, handover.y, init.y)
		}
		if i > 0 && (c.x < doc.calls[i-1].x || c.y <= doc.calls[i-1].y) {
			t.Errorf("initcall %s does not start after and below %s", c.to, doc.calls[i-1].to)
		}
		var k Call
		for _, x := range calls {
			if x.Name == c.to {
				k = x
			}
		}
		if x0 := handover.x + (ms(k.At-k.Took)-20)*scale; math.Abs(c.x-x0) > 0.2 || math.Abs(c.w-math.Max(1, ms(k.Took)*scale)) > 0.2 {
			t.Errorf("initcall %s: x %.1f, width %.1f; want %.1f, %.1f", c.to, c.x, c.w, x0, ms(k.Took)*scale)
		}
	}
	if !slices.ContainsFunc(doc.texts, func(tx svgText) bool { return strings.Contains(tx.string, "initcall f0") }) {
		t.Error("no row labelled with the longest initcall")
	}
	for _, c := range doc.calls {
		if c.x < 0 || c.x+c.w > doc.w || c.y+c.h > doc.h {
			t.Errorf("initcall %s outside the picture", c.to)
		}
	}
	if all := parseSVG(t, r.Chart("t")); len(all.calls) != chartCalls {
		t.Errorf("the chart of every layout has %d initcall bars, want off2f's %d alone", len(all.calls), chartCalls)
	}
}

func TestMedianBoot(t *testing.T) {
	at := func(service float64) *Boot { return boot(0, 1, 2, 3, 4, 5, 6, service) }
	noService := &Boot{Stages: map[string]time.Duration{StageInit: time.Millisecond}}
	for _, c := range []struct {
		name string
		runs []*Boot
		want int // the run; 0: none
	}{
		{"one", []*Boot{at(10)}, 1},
		{"odd", []*Boot{at(30), at(10), at(20)}, 3},
		{"even: the lower middle", []*Boot{at(40), at(10), at(30), at(20)}, 4},
		{"ties: the earlier run", []*Boot{at(20), at(20), at(20)}, 2},
		{"a run without service left out", []*Boot{at(30), noService, at(10), at(20)}, 4},
		{"none", []*Boot{noService}, 0},
		{"no runs", nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Report{Runs: map[appliance.Layout][]*Boot{appliance.OFF2F: c.runs}}
			run, b, ok := r.MedianBoot(appliance.OFF2F)
			if ok != (c.want != 0) || run != c.want || ok && b != c.runs[run-1] {
				t.Errorf("MedianBoot = run %d, ok %v; want run %d", run, ok, c.want)
			}
		})
	}
}

func TestTickStep(t *testing.T) {
	for _, c := range []struct{ max, want float64 }{{0, 1}, {4000, 1000}, {3721, 1000}, {150, 50}, {9, 2}, {1, 0.2}} {
		if got := TickStep(c.max); got != c.want {
			t.Errorf("TickStep(%v) = %v, want %v", c.max, got, c.want)
		}
	}
}
