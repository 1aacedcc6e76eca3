package main

import (
	"io"
	"strings"
	"testing"
)

func TestCPURateFlag(t *testing.T) {
	c, err := parseFlags([]string{"-cpu-rate", "5e8"}, io.Discard)
	if err != nil || c.CPURate != 500_000_000 {
		t.Fatalf("-cpu-rate 5e8: %+v, %v", c, err)
	}
	if c, err := parseFlags(nil, io.Discard); err != nil || c.CPURate != 0 {
		t.Fatalf("default: wall clock wanted: %+v, %v", c, err)
	}
	for _, bad := range []string{"3e8", "1.5", "-1e9"} {
		if _, err := parseFlags([]string{"-cpu-rate", bad}, io.Discard); err == nil || !strings.Contains(err.Error(), "power of two") {
			t.Errorf("-cpu-rate %s: %v", bad, err)
		}
	}
}
