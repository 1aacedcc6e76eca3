package measure

import (
	"bytes"
	"cmp"
	"fmt"
	"html"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/nvboot/nvboot/host/image/appliance"
)

// MedianBoot is the boot of layout l the chart draws: the median of its
// runs by power-on to service (the lower of the middle two when the runs
// are even), so every stage comes from one real boot. run counts from 1 in
// the order the boots ran; ok is false when no run of l reached service.
func (r *Report) MedianBoot(l appliance.Layout) (run int, b *Boot, ok bool) {
	var idx []int
	for i, b := range r.Runs[l] {
		if _, ok := b.Stages[StageService]; ok {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return 0, nil, false
	}
	// Stable: of boots equally fast, the earlier run.
	sort.SliceStable(idx, func(a, c int) bool {
		return r.Runs[l][idx[a]].Stages[StageService] < r.Runs[l][idx[c]].Stages[StageService]
	})
	i := idx[(len(idx)-1)/2]
	return i + 1, r.Runs[l][i], true
}

// interval is one bar of a boot chart: from one mark to the next.
type interval struct {
	from, to   string
	start, end time.Duration
}

// intervals are b's marks in the order they happened, each a bar from the
// mark before it (power-on first). nvinit's ready and answered marks can
// come in either order, so the order is the boot's own, not Stages'; no
// bar runs backwards.
func intervals(b *Boot) []interval {
	type mark struct {
		name string
		at   time.Duration
	}
	var marks []mark
	for _, st := range Stages {
		if t, ok := b.Stages[st]; ok {
			marks = append(marks, mark{st, t})
		}
	}
	slices.SortStableFunc(marks, func(x, y mark) int { return cmp.Compare(x.at, y.at) })
	var out []interval
	prev := mark{"power-on", 0}
	for _, m := range marks {
		out = append(out, interval{prev.name, m.name, prev.at, m.at})
		prev = m
	}
	return out
}

// Chart geometry, in px; text in font-size px.
const (
	chartFont    = 12.0 // the labels'
	titleFont    = 15.0
	headingFont  = 13.0
	chartMargin  = 14.0
	plotWidth    = 720.0 // the time axis
	rowHeight    = 22.0
	barHeight    = 14.0
	groupGap     = 16.0
	labelPad     = 5.0 // between a bar and its label
	columnPad    = 16.0
	axisTickSize = 5.0
)

// stageColors colour a bar by the stage it ends at, the same in every lane
// group.
var stageColors = map[string]string{
	StageLoaded: "#9aa7c7", StageKernel: "#5fb49c", StageHandover: "#f08a5d", StageInit: "#d77fb3",
	StageStore: "#9ccc65", StageState: "#e6c229", StageReady: "#c9a77c", StageService: "#6c8ebf",
}

// lane is one layout's group of rows on a chart.
type lane struct {
	layout appliance.Layout
	run    int
	boot   *Boot
	bars   []interval
	calls  []Call // under the kernel → handover bar: its profile's longest
}

// chartCalls is how many of a profile's longest initcalls and probes a
// chart draws under the kernel → handover bar.
const chartCalls = 6

// callColor is their bars' colour: the kernel's, lighter.
const callColor = "#b5dccf"

// Chart draws a boot chart (SVG) of the layouts (all the report's when none
// are named): for each, a lane group with the median boot's stages
// (MedianBoot) as bars on one millisecond axis, in the order they happened,
// each labelled with its length. The heading of a group says which run it
// drew; the title, the clock and the storage. The picture is as wide as its
// text needs: no label is cut off.
func (r *Report) Chart(title string, layouts ...appliance.Layout) []byte {
	if len(layouts) == 0 {
		layouts = r.Layouts
	}
	var lanes []lane
	var total time.Duration
	for _, l := range layouts {
		run, b, ok := r.MedianBoot(l)
		if !ok {
			continue
		}
		ln := lane{layout: l, run: run, boot: b, bars: intervals(b)}
		for _, iv := range ln.bars {
			total = max(total, iv.end)
		}
		if p := r.Profiles[l]; p != nil {
			ln.calls = append(ln.calls, p.Calls[:min(chartCalls, len(p.Calls))]...)
			slices.SortStableFunc(ln.calls, func(x, y Call) int { return cmp.Compare(x.At-x.Took, y.At-y.Took) })
			for _, c := range ln.calls {
				total = max(total, c.At)
			}
		}
		lanes = append(lanes, ln)
	}
	step := TickStep(ms(total))
	axisMax := math.Max(step, math.Ceil(ms(total)/step)*step)
	scale := plotWidth / axisMax

	subtitle := []string{
		"one boot per layout, the median by power-on to service; its stages in the order they happened",
		r.Machine.String(r.Accel) + "; storage " + cmp.Or(r.Storage.About, r.Storage.Name),
	}
	if len(r.Profiles) > 0 {
		subtitle = append(subtitle, "under kernel → handover: the longest initcalls and driver probes of the profiled boot (nvboot measure -profile), on its clock")
	}
	rowLabel := func(iv interval) string { return iv.from + " → " + iv.to }
	callLabel := func(c Call) string { return "  " + c.Kind + " " + c.Name }
	heading := func(ln lane) string {
		return fmt.Sprintf("%s: run %d of %d, service answered at %s ms", ln.layout, ln.run, len(r.Runs[ln.layout]),
			fmtMS(ln.boot.Stages[StageService]))
	}

	// The label column is as wide as its longest label.
	column := 0.0
	for _, ln := range lanes {
		for _, iv := range ln.bars {
			column = math.Max(column, TextWidth(rowLabel(iv), chartFont, false))
		}
		for _, c := range ln.calls {
			column = math.Max(column, TextWidth(callLabel(c), chartFont, false))
		}
	}
	plotX := chartMargin + column + columnPad
	px := func(d time.Duration) float64 { return plotX + ms(d)*scale }

	var c canvas
	width := plotX + plotWidth + chartMargin
	// Text grows the picture to the right; nothing is drawn left of 0.
	fit := func(x, w float64) { width = math.Max(width, x+w+chartMargin) }

	y := chartMargin + titleFont
	c.text(chartMargin, y, titleFont, true, "start", "", title)
	fit(chartMargin, TextWidth(title, titleFont, true))
	for _, s := range subtitle {
		y += chartFont + 6
		c.text(chartMargin, y, chartFont, false, "start", "#444", s)
		fit(chartMargin, TextWidth(s, chartFont, false))
	}
	y += 14
	plotTop := y
	for gi, ln := range lanes {
		if gi > 0 {
			y += groupGap
		}
		y += rowHeight
		h := heading(ln)
		c.text(chartMargin, y-6, headingFont, true, "start", "", h)
		fit(chartMargin, TextWidth(h, headingFont, true))
		// row draws one bar, from start to end, with its label left and
		// its length right of it (or inside its right end, where the right
		// would be past the axis).
		row := func(label string, start, end time.Duration, draw func(x, y, w, h float64)) {
			top := y + (rowHeight-barHeight)/2
			base := y + rowHeight/2 + chartFont*0.35
			c.text(chartMargin, base, chartFont, false, "start", "", label)
			x0, x1 := px(start), px(end)
			draw(x0, top, x1-x0, barHeight)
			length := fmtMS(end-start) + " ms"
			lw := TextWidth(length, chartFont, false)
			switch {
			case x1+labelPad+lw <= plotX+plotWidth || x1-x0 < lw+2*labelPad:
				// The picture widened when it runs past the axis' end.
				c.text(x1+labelPad, base, chartFont, false, "start", "", length)
				fit(x1+labelPad, lw)
			default:
				c.text(x1-labelPad, base, chartFont, false, "end", "", length)
			}
			y += rowHeight
		}
		for _, iv := range ln.bars {
			row(rowLabel(iv), iv.start, iv.end, func(x, y, w, h float64) { c.bar(ln.layout, iv, x, y, w, h) })
			if iv.to != StageHandover {
				continue
			}
			for _, call := range ln.calls {
				row(callLabel(call), call.At-call.Took, call.At, func(x, y, w, h float64) { c.call(ln.layout, call, x, y, w, h) })
			}
		}
	}
	plotBottom := y + 6
	// The time axis: a grid line and a label per tick.
	for v := 0.0; v <= axisMax+step/2; v += step {
		x := plotX + v*scale
		c.line(x, plotTop, x, plotBottom, "#e3e3e3")
		c.line(x, plotBottom, x, plotBottom+axisTickSize, "#000")
		t := fmt.Sprintf("%.0f", v)
		c.text(x, plotBottom+axisTickSize+chartFont+2, chartFont, false, "middle", "", t)
		fit(x, TextWidth(t, chartFont, false)/2)
	}
	c.line(plotX, plotBottom, plotX+plotWidth, plotBottom, "#000")
	axisLabel := "ms since power-on"
	y = plotBottom + axisTickSize + 2*chartFont + 10
	c.text(plotX+plotWidth/2, y, chartFont, false, "middle", "#444", axisLabel)
	height := y + chartMargin

	return c.svg(width, height)
}

// canvas collects a chart's elements: lines under bars and text.
type canvas struct{ lines, shapes bytes.Buffer }

// svg is the chart drawn on c, width by height on a white ground: the
// lines (the grid) first, under the shapes.
func (c *canvas) svg(width, height float64) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="%.0f">`+"\n",
		math.Ceil(width), math.Ceil(height), math.Ceil(width), math.Ceil(height), chartFont)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%.0f" height="%.0f" fill="white"/>`+"\n", math.Ceil(width), math.Ceil(height))
	b.Write(c.lines.Bytes())
	b.Write(c.shapes.Bytes())
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func (c *canvas) text(x, y, size float64, bold bool, anchor, fill, s string) {
	fmt.Fprintf(&c.shapes, `<text x="%.1f" y="%.1f"`, x, y)
	if size != chartFont {
		fmt.Fprintf(&c.shapes, ` font-size="%.0f"`, size)
	}
	if bold {
		c.shapes.WriteString(` font-weight="bold"`)
	}
	if anchor != "start" {
		fmt.Fprintf(&c.shapes, ` text-anchor="%s"`, anchor)
	}
	if fill != "" {
		fmt.Fprintf(&c.shapes, ` fill="%s"`, fill)
	}
	fmt.Fprintf(&c.shapes, ">%s</text>\n", html.EscapeString(s))
}

func (c *canvas) line(x1, y1, x2, y2 float64, stroke string) {
	fmt.Fprintf(&c.lines, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x1, y1, x2, y2, stroke)
}

// bar draws iv at least 1 px wide, so that an instant stage still shows.
func (c *canvas) bar(l appliance.Layout, iv interval, x, y, w, h float64) {
	fmt.Fprintf(&c.shapes, `<rect class="stage" data-layout="%s" data-from="%s" data-to="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">`,
		html.EscapeString(string(l)), iv.from, iv.to, x, y, math.Max(w, 1), h, cmp.Or(stageColors[iv.to], "#999"))
	fmt.Fprintf(&c.shapes, "<title>%s → %s: %s ms, from %s to %s ms after power-on</title></rect>\n",
		iv.from, iv.to, fmtMS(iv.end-iv.start), fmtMS(iv.start), fmtMS(iv.end))
}

// call draws an initcall or probe of the profile at least 1 px wide.
func (c *canvas) call(l appliance.Layout, k Call, x, y, w, h float64) {
	fmt.Fprintf(&c.shapes, `<rect class="initcall" data-layout="%s" data-name="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">`,
		html.EscapeString(string(l)), html.EscapeString(k.Name), x, y, math.Max(w, 1), h, callColor)
	fmt.Fprintf(&c.shapes, "<title>%s %s: %s ms, ending %s ms after power-on (the profiled boot)</title></rect>\n",
		k.Kind, html.EscapeString(k.Name), fmtMS(k.Took), fmtMS(k.At))
}

// fmtMS is d in ms: to 0.1 ms below 10 ms, whole above.
func fmtMS(d time.Duration) string {
	if v := ms(d); v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", ms(d))
}

// TickStep is an axis' tick step for [0, max]: 1, 2 or 5 times a power of
// ten, cutting it into about five.
func TickStep(max float64) float64 {
	if max <= 0 {
		return 1
	}
	raw := max / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// TextWidth is how wide s is drawn at size px in a sans-serif font, on the
// wide side (the viewer's font is not known): what a chart leaves room for.
func TextWidth(s string, size float64, bold bool) float64 {
	em := 0.0
	for _, r := range s {
		switch {
		case r == ' ':
			em += 0.33
		case strings.ContainsRune("il.,:;'|!()[]", r):
			em += 0.4
		case r == 'm' || r == 'w' || r == 'M' || r == 'W':
			em += 0.95
		case unicode.IsUpper(r):
			em += 0.75
		case r < 128:
			em += 0.64
		default:
			em += 1.0 // arrows, dashes, ×
		}
	}
	if bold {
		em *= 1.1
	}
	return em * size
}
