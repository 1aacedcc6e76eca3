package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestHostDoesNotLinkTheDevice: nvboot reaches the device side only through
// the contract (image/guest), and the device side does not link the host's
// image config: linking the other side would let its code and its copies
// drift into each other again.
func TestHostDoesNotLinkTheDevice(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not installed")
	}
	const nv = "github.com/nvboot/nvboot/"
	for _, tc := range []struct {
		cmd, pkg string
		not      []string
	}{
		{"nvboot", ".", []string{nv + "internal/nvinit", nv + "internal/poold"}},
		{"nvinit", "../nvinit", []string{nv + "image/config", nv + "image/appliance"}},
		{"poold", "../poold", []string{nv + "image/config", nv + "image/appliance"}},
	} {
		out, err := exec.Command("go", "list", "-deps", tc.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tc.pkg, err)
		}
		deps := strings.Fields(string(out))
		for _, dep := range deps {
			if slices.Contains(tc.not, dep) {
				t.Errorf("cmd/%s links %s: the two sides meet only in image/guest", tc.cmd, dep)
			}
		}
		if !slices.Contains(deps, nv+"image/guest") {
			t.Errorf("cmd/%s does not link image/guest: is go list looking at the right package?", tc.cmd)
		}
	}
}
