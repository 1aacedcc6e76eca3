package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

func TestFlags(t *testing.T) {
	var out bytes.Buffer
	if _, err := parseFlags("bench/pager", []string{"-h"}, &out, io.Discard); err == nil || !strings.Contains(out.String(), "Examples:") {
		t.Fatalf("-h: %v, %q", err, out.String())
	}
	c, err := parseFlags("bench/pager", []string{"-n", "64,128", "-budget", "2MiB", "-slack", "1MiB"}, io.Discard, io.Discard)
	if err != nil || len(c.Ns) != 2 || c.Budget != 2<<20 || c.Slack != 1<<20 {
		t.Fatalf("parseFlags = %+v, %v", c, err)
	}
	if c, err := parseFlags("bench/pager", []string{"-slack", "own"}, io.Discard, io.Discard); err != nil || !c.SlackOwn || c.Slack != 0 {
		t.Fatalf("-slack own: %+v, %v", c, err)
	}
	if c, err := parseFlags("bench/pager", nil, io.Discard, io.Discard); err != nil || !c.SlackNone || c.SlackOwn || c.GuestSlack != "none" {
		t.Fatalf("the default is the issue's setup, -slack none: %+v, %v", c, err)
	}
	if c, err := parseFlags("bench/pager", []string{"-quick"}, io.Discard, io.Discard); err != nil || c.SlackNone || c.Budget != 1<<20 {
		t.Fatalf("-quick keeps a slack for the children's own memory: %+v, %v", c, err)
	}
	if c, err := parseFlags("bench/pager", []string{"-quick", "-slack", "none"}, io.Discard, io.Discard); err != nil || !c.SlackNone {
		t.Fatalf("-quick -slack none: %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"-n", "8"}, {"-n", "x"}, {"-budget", "1KiB"}, {"-runs", "0"}, {"extra"}, {"-slack", "-1"}, {"-guest-slack", "some"}, {"-swap", "yes"}} {
		if _, err := parseFlags("bench/pager", bad, io.Discard, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestGenAndMultiply: the generated matrices read back element by element,
// and the product of known small matrices is right.
func TestGenAndMultiply(t *testing.T) {
	g := gen{3, aElem}
	b := make([]byte, 9*8)
	if n, err := g.ReadAt(b, 0); n != len(b) || err != nil {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if n, err := g.ReadAt(b, 72); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at the end = %d, %v", n, err)
	}
	a := []float64{1, 2, 3, 4}
	id := []float64{1, 0, 0, 1}
	c := make([]float64, 4)
	multiply(a, id, c, 2)
	for i := range a {
		if c[i] != a[i] {
			t.Fatalf("A × I = %v", c)
		}
	}
}

// TestSwapFile: -swap auto's swap file is on while the run needs it and
// gone after.
func TestSwapFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("swapon needs root")
	}
	dir := t.TempDir()
	sw, err := startSwap(dir, 1<<20)
	if err != nil {
		if strings.Contains(err.Error(), "Operation not permitted") {
			t.Skipf("swapon refused here: %v", err)
		}
		t.Fatal(err)
	}
	swaps, _ := os.ReadFile("/proc/swaps")
	on := strings.Contains(string(swaps), sw.path)
	if err := sw.stop(); err != nil {
		t.Fatal(err)
	}
	if !on {
		t.Fatalf("%s is not in /proc/swaps:\n%s", sw.path, swaps)
	}
	if swaps, _ := os.ReadFile("/proc/swaps"); strings.Contains(string(swaps), sw.path) {
		t.Fatalf("%s still on after stop", sw.path)
	}
	if _, err := os.Stat(sw.path); !os.IsNotExist(err) {
		t.Fatalf("the swap file is left: %v", err)
	}
}
