package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nvboot/nvboot/format/benchjson"
)

// inside is the guest side: the same measurement in -dir (the DAX mount),
// printed as one JSON line between markers on the console.
func inside(args []string, stdout, stderr io.Writer) error {
	var c config
	fs := flag.NewFlagSet("bench/omf inside", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Dir, "dir", "/nv", "`directory` on the DAX mount")
	fs.IntVar(&c.Runs, "runs", 5, "runs")
	units := fs.String("units", "1024,4096,32768", "`sizes`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if c.Units, err = parseUnits(*units); err != nil {
		return err
	}
	o, err := measure(c, c.Dir, stderr)
	if err != nil {
		return err
	}
	if m, err := os.ReadFile("/proc/mounts"); err == nil {
		for _, l := range strings.Split(string(m), "\n") {
			if strings.Contains(l, " "+c.Dir+" ") {
				o.Env["mount"] = l
			}
		}
	}
	var b strings.Builder
	if err := benchjson.WriteJSON(&b, o); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s%s%s\n", jsonBegin, strings.ReplaceAll(b.String(), "\n", " "), jsonEnd)
	return nil
}

const (
	jsonBegin = "BENCH-OMF-JSON<<"
	jsonEnd   = ">>BENCH-OMF-JSON"
)
