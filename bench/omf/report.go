package main

import (
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/nvboot/nvboot/format/benchjson"
)

// measureAll runs the host part and the guest part the configuration asks
// for and names the ratios (see the package comment).
func measureAll(c config, progress io.Writer) (benchjson.Output, error) {
	kernel, err := guestPlan(c, progress)
	if err != nil {
		return benchjson.Output{}, err
	}
	var o benchjson.Output
	if c.Guest != "only" {
		if o, err = measure(c, c.Dir, progress); err != nil {
			return o, err
		}
	} else {
		o = benchjson.Output{Bench: "omf", Env: map[string]string{}, Ratios: map[string]float64{}}
	}
	o.Env["host_goarch"] = runtime.GOARCH
	o.Env["host_cpus"] = fmt.Sprint(runtime.NumCPU())
	o.Env["date"] = time.Now().UTC().Format(time.RFC3339)
	if kernel == "" {
		return o, nil
	}
	g, accel, err := measureGuest(c, kernel, progress)
	if err != nil {
		return o, err
	}
	merge(&o, g, kernel, accel)
	// The guest's clock, unprefixed as its ratios are: the host part is
	// always on the host's clock.
	c.Clock.Env(o.Env, "")
	return o, nil
}

// merge adds the guest's figures (dax_*) and makes its ratios the
// unprefixed ones; the host's keep a host_ prefix.
func merge(o *benchjson.Output, g benchjson.Output, kernel, accel string) {
	o.AdoptGuestRatios(g.Ratios)
	for _, r := range g.Results {
		r.Name = "dax_" + r.Name
		o.Results = append(o.Results, r)
	}
	for k, v := range g.Env {
		o.Env["guest_"+k] = v
	}
	o.Env["guest_kernel"] = kernel
	o.Env["guest_accel"] = accel
}

func emit(w io.Writer, asJSON bool, o benchjson.Output) error {
	if asJSON {
		return benchjson.WriteJSON(w, o)
	}
	return benchjson.WriteTable(w, o)
}
