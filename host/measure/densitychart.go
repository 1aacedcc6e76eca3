package measure

import (
	"cmp"
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"

	"github.com/nvboot/nvboot/host/image/appliance"
)

// layoutColors colour a density chart's lines by layout.
var layoutColors = map[appliance.Layout]string{
	appliance.OFF2F: "#2f7ebc", appliance.ELF: "#d9534f", appliance.DAXELF: "#5cb85c", appliance.Initramfs: "#9b59b6",
}

// Chart draws host memory per appliance against N (SVG): a line per layout
// and start (staggered solid, burst dashed), a point per run labelled
// with its MiB, the Ns evenly spaced in the order measured.
func (r *DensityReport) Chart(title string) []byte {
	const (
		plotW, plotH = 560.0, 300.0
		left, top    = 70.0, 92.0
	)
	maxMiB := 0.0
	for _, x := range r.Runs {
		maxMiB = math.Max(maxMiB, x.PerAppliance())
	}
	step := TickStep(maxMiB)
	axisMax := math.Max(step, math.Ceil(maxMiB/step)*step)
	xAt := func(i int) float64 {
		if len(r.Counts) == 1 {
			return left + plotW/2
		}
		return left + float64(i)*plotW/float64(len(r.Counts)-1)
	}
	yAt := func(v float64) float64 { return top + plotH - v/axisMax*plotH }

	var c canvas
	width := left + plotW + chartMargin
	c.text(chartMargin, chartMargin+titleFont, titleFont, true, "start", "", title)
	sub := r.Machine.String(r.Accel) + "; storage " + cmp.Or(r.Storage.About, r.Storage.Name) + fmt.Sprintf("; %d MiB of RAM a guest", r.MemMiB)
	c.text(chartMargin, chartMargin+titleFont+chartFont+6, chartFont, false, "start", "#444", sub)
	c.text(chartMargin, chartMargin+titleFont+2*(chartFont+6), chartFont, false, "start", "#444",
		"host memory per appliance: each QEMU's PSS, the pages of the image's shared files the host keeps, once; staggered solid, burst dashed")
	width = math.Max(width, chartMargin+TextWidth(sub, chartFont, false)+chartMargin)
	for v := 0.0; v <= axisMax+step/2; v += step {
		y := yAt(v)
		c.line(left, y, left+plotW, y, "#e3e3e3")
		c.text(left-6, y+4, chartFont, false, "end", "", strconv.FormatFloat(v, 'f', -1, 64))
	}
	for i, n := range r.Counts {
		x := xAt(i)
		c.line(x, top+plotH, x, top+plotH+axisTickSize, "#000")
		c.text(x, top+plotH+axisTickSize+chartFont+2, chartFont, false, "middle", "", strconv.Itoa(n))
	}
	c.line(left, top+plotH, left+plotW, top+plotH, "#000")
	c.line(left, top, left, top+plotH, "#000")
	c.text(left+plotW/2, top+plotH+2*chartFont+14, chartFont, false, "middle", "#444", "N: appliances of one image running at once")
	c.text(16, top+plotH/2, chartFont, false, "middle", "#444", "MiB")
	// A legend right of the plot: a line sample and the series' name.
	legendX, legendY := left+plotW+24, top+chartFont
	for _, start := range r.Starts {
		for _, l := range r.Layouts {
			var pts []string
			color := cmp.Or(layoutColors[l], "#666")
			for i, n := range r.Counts {
				x := r.Run(l, start, n)
				if x == nil {
					continue
				}
				px, py := xAt(i), yAt(x.PerAppliance())
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
				fmt.Fprintf(&c.shapes, `<circle class="point" data-layout="%s" data-start="%s" data-n="%d" cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %d %s: %.1f MiB an appliance (%.1f without TCG's translation cache)</title></circle>`+"\n",
					html.EscapeString(string(l)), start, n, px, py, color, html.EscapeString(string(l)), n, start, x.PerAppliance(), x.PerApplianceNoTCG())
			}
			if len(pts) == 0 {
				continue
			}
			dash := ""
			if start == StartBurst {
				dash = ` stroke-dasharray="6 4"`
			}
			fmt.Fprintf(&c.lines, `<polyline class="series" data-layout="%s" data-start="%s" points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n",
				html.EscapeString(string(l)), start, strings.Join(pts, " "), color, dash)
			fmt.Fprintf(&c.lines, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n",
				legendX, legendY-4, legendX+28, legendY-4, color, dash)
			label := string(l) + ", " + start
			if last := r.Run(l, start, r.Counts[len(r.Counts)-1]); last != nil {
				label += fmt.Sprintf(": %.1f MiB at N=%d", last.PerAppliance(), last.N)
			}
			c.text(legendX+36, legendY, chartFont, false, "start", "", label)
			width = math.Max(width, legendX+36+TextWidth(label, chartFont, false)+chartMargin)
			legendY += rowHeight
		}
	}
	height := top + plotH + 2*chartFont + 14 + chartMargin
	return c.svg(width, height)
}
