package guestrun

import (
	"flag"
	"io"
	"testing"
)

func TestParseOutput(t *testing.T) {
	console := "boot\nx BEGIN{\"bench\":\"omf\",\"env\":{\"a\":\"b\"},\"ratios\":{\"r\":0.5},\"results\":[]}END y\n"
	o, err := ParseOutput(console, "BEGIN", "END")
	if err != nil || o.Bench != "omf" || o.Ratios["r"] != 0.5 || o.Env["a"] != "b" {
		t.Fatalf("ParseOutput = %+v, %v", o, err)
	}
	for _, bad := range []string{"nothing", "BEGIN{\"unknown\":1}END", "BEGIN{END"} {
		if _, err := ParseOutput(bad, "BEGIN", "END"); err == nil {
			t.Errorf("ParseOutput(%q) succeeded", bad)
		}
	}
}

func TestClockFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		rate int64
		bad  bool
	}{
		{nil, 1_000_000_000, false},
		{[]string{"-clock", "wall"}, 0, false},
		{[]string{"-cpu-rate", "5e8"}, 500_000_000, false},
		{[]string{"-cpu-rate", "3e8"}, 0, true},
		{[]string{"-clock", "sundial"}, 0, true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c := AddClockFlags(fs)
		err := fs.Parse(tc.args)
		var rate int64
		if err == nil {
			rate, err = c.CPURate()
		}
		if (err != nil) != tc.bad || rate != tc.rate {
			t.Errorf("%v: rate %d, %v", tc.args, rate, err)
		}
		if !tc.bad {
			env := map[string]string{}
			c.Env(env, "guest_")
			if env["guest_clock"] != c.Name || (rate != 0) != (env["guest_cpu_rate"] != "") {
				t.Errorf("%v: env %v", tc.args, env)
			}
		}
	}
}
