package main

import (
	"fmt"
	"io"
	"time"
)

// writeSVG plots the memory series: time on x, MiB held on y, one line per
// series.
func writeSVG(w io.Writer, title string, names []string, series [][]point, burst time.Duration) error {
	const W, H, L, B, T, R = 640, 320, 60, 40, 30, 150
	var tmax time.Duration
	var ymax int64 = 1
	for _, s := range series {
		for _, p := range s {
			tmax, ymax = max(tmax, p.T), max(ymax, p.Held)
		}
	}
	ymib := float64(ymax)/(1<<20)*1.1 + 0.5
	x := func(t time.Duration) float64 { return L + float64(t)/float64(tmax)*(W-L-R) }
	y := func(b int64) float64 { return H - B - float64(b)/(1<<20)/ymib*(H-B-T) }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="18" font-size="14">%s</text>`+"\n", L, title)
	fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#eee"/><text x="%.1f" y="%d" fill="#888">burst</text>`+"\n",
		x(0), T, x(burst)-x(0), H-B-T, x(0)+4, T+14)
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n",
		L, H-B, W-R, H-B, L, T, L, H-B)
	for s := 0.0; s <= tmax.Seconds(); s += 0.5 {
		px := x(time.Duration(s * float64(time.Second)))
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">%.1f s</text>`+"\n", px, H-B+16, s)
	}
	step := max(1.0, float64(int(ymib/5)))
	for m := 0.0; m <= ymib; m += step {
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%.0f MiB</text>`+"\n", L-4, y(int64(m*(1<<20)))+4, m)
	}
	colors := []string{"#d62728", "#1f77b4", "#2ca02c"}
	for i, s := range series {
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="2" points="`, colors[i%len(colors)])
		for _, p := range s {
			fmt.Fprintf(w, "%.1f,%.1f ", x(p.T), y(p.Held))
		}
		fmt.Fprintf(w, `"/>`+"\n")
		fmt.Fprintf(w, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", W-R+8, T+16+18*i, colors[i%len(colors)], names[i])
	}
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}
