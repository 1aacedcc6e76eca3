package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/internal/cli"
)

// Bad flags are refused before a registry starts or anything is built,
// each naming the flag and why; the defaults measure both parts.
func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" parses
	}{
		{nil, ""},
		{[]string{"-parts", "fleet, big,fleet", "-poll", "10s", "-fleet", "2"}, ""},
		{[]string{"-parts", "big,boot"}, `unknown part "boot"`},
		{[]string{"-parts", ","}, "names nothing"},
		{[]string{"-fleet", "0"}, "-fleet 0"},
		{[]string{"-poll", "500ms"}, "-poll 500ms"},
		{[]string{"-poll", "48h"}, "-poll 48h0m0s"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(&cli.Context{Stdout: &bytes.Buffer{}, Stderr: &stderr, Args: tc.args})
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a usage error naming %q", tc.args, err, tc.want)
		}
	}
	o, err := parseFlags(&cli.Context{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	if err != nil || strings.Join(o.parts, ",") != "big,fleet" || o.fleet != 4 || o.poll != 5*time.Second {
		t.Errorf("defaults: %+v %v", o, err)
	}
}
