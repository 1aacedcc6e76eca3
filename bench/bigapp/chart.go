package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"sort"
	"strings"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/measure"
)

// chart draws two panels, power_on_to_service and init_to_service: x the
// services' text in MiB, y the median in ms with a bar from min to max, one
// line per layout through the sizes.
func (r *report) chart() []byte {
	const panelW, panelH, left, right, top, bottom = 470.0, 390.0, 60.0, 20.0, 50.0, 80.0
	sizes := append([]sizeResult(nil), r.Sizes...)
	sort.SliceStable(sizes, func(i, j int) bool { return sizes[i].Text.Total < sizes[j].Text.Total })
	xmax := 1.0
	for _, s := range sizes {
		xmax = math.Max(xmax, mib(s.Text.Total))
	}
	xstep := measure.TickStep(xmax)
	xmax = math.Ceil(xmax*1.05/xstep) * xstep
	colors := map[string]string{"off2f": "#d62728", "elf": "#1f77b4", "dax-elf": "#2ca02c", "initramfs": "#9467bd"}
	var b bytes.Buffer
	env := map[string]string{}
	if len(sizes) > 0 {
		env = sizes[0].Measure.Env
	}
	title := fmt.Sprintf("bench/bigapp: median of %d cold boots per layout and size (%s clock, %s)", r.Runs, env["clock"], env["storage"])
	// As wide as the title needs: a long storage description is not cut off.
	w := math.Ceil(math.Max(2*panelW, 10+measure.TextWidth(title, 14, false)+10))
	h := panelH + 30
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14">%s</text>`+"\n", html.EscapeString(title))
	for p, sp := range spans {
		x0 := float64(p) * panelW
		ymax := 1.0
		for _, s := range sizes {
			for _, l := range r.Layouts {
				if v, ok := result(s.Measure, l+"."+sp); ok {
					ymax = math.Max(ymax, v.Max)
				}
				if v, ok := scaledOf(s, r.Layouts)[s.Name+".scaled."+l+"."+sp]; ok {
					ymax = math.Max(ymax, v.Max)
				}
			}
		}
		ystep := measure.TickStep(ymax)
		ymax = math.Ceil(ymax*1.05/ystep) * ystep
		px := func(v float64) float64 { return x0 + left + v/xmax*(panelW-left-right) }
		py := func(v float64) float64 { return top + 10 + (1-v/ymax)*(panelH-top-bottom) }
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="13" font-weight="bold">%s (ms)</text>`+"\n", x0+left, top-8, sp)
		// Axes, grid and ticks.
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", px(0), py(0), px(xmax), py(0))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", px(0), py(0), px(0), py(ymax))
		for v := 0.0; v <= ymax+ystep/2; v += ystep {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", px(0), py(v), px(xmax), py(v))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%.0f</text>`+"\n", px(0)-4, py(v)+4, v)
		}
		for v := 0.0; v <= xmax+xstep/2; v += xstep {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%.0f</text>`+"\n", px(v), py(0)+16, v)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">text+rodata of the services started at boot (MiB)</text>`+"\n",
			px(xmax/2), py(0)+34)
		// Under each size: its name, and off2f's time as a fraction of the
		// first other layout's.
		for _, s := range sizes {
			x := px(mib(s.Text.Total))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#666">%s</text>`+"\n", x, py(0)+50, html.EscapeString(s.Name))
			if ratio, ok := s.Measure.Ratios[sp+".off2f_vs_"+strings.ReplaceAll(r.Layouts[1], "-", "")]; ok {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s" font-size="11">%.2f× %s</text>`+"\n",
					x, py(0)+63, colors["off2f"], ratio, html.EscapeString(r.Layouts[1]))
			}
		}
		// One line per layout, a min-max bar at each size.
		for li, l := range r.Layouts {
			c := colors[l]
			if c == "" {
				c = "#444"
			}
			var pts bytes.Buffer
			for _, s := range sizes {
				v, ok := result(s.Measure, l+"."+sp)
				if !ok {
					continue
				}
				x := px(mib(s.Text.Total))
				fmt.Fprintf(&pts, "%.1f,%.1f ", x, py(v.Median))
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x, py(v.Min), x, py(v.Max), c)
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s %s %s: %.0f ms (%.0f-%.0f)</title></circle>`+"\n",
					x, py(v.Median), c, html.EscapeString(s.Name), l, sp, v.Median, v.Min, v.Max)
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, bytes.TrimSpace(pts.Bytes()))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`+"\n", px(0)+10, top+26+16*float64(li), c, html.EscapeString(l))
			// The time-scaled device, dashed.
			pts.Reset()
			for _, s := range sizes {
				if v, ok := scaledOf(s, r.Layouts)[s.Name+".scaled."+l+"."+sp]; ok {
					x := px(mib(s.Text.Total))
					fmt.Fprintf(&pts, "%.1f,%.1f ", x, py(v.Median))
					fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="6" height="6" fill="white" stroke="%s"><title>%s %s %s, time-scaled device: %.0f ms (%.0f-%.0f)</title></rect>`+"\n",
						x-3, py(v.Median)-3, c, html.EscapeString(s.Name), l, sp, v.Median, v.Min, v.Max)
				}
			}
			if pts.Len() > 0 {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="6 4" points="%s"/>`+"\n", c, bytes.TrimSpace(pts.Bytes()))
			}
		}
		if r.Scale > 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#444">dashed, squares: time-scaled device (-scale %d)</text>`+"\n",
				px(0)+10, top+26+16*float64(len(r.Layouts)), r.Scale)
		}
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// scaledOf is a size's time-scaled results by name.
func scaledOf(s sizeResult, layouts []string) map[string]benchjson.Result {
	res, _ := scaledResults(s.Name, layouts, s.Scaled)
	m := map[string]benchjson.Result{}
	for _, r := range res {
		m[r.Name] = r
	}
	return m
}
