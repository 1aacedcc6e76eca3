package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestHostDoesNotLinkTheDevice: nvboot reaches the device side only through
// the contract (image/guest); linking PID 1 or the pool daemon would let
// their code and their host-side copies drift into each other again.
func TestHostDoesNotLinkTheDevice(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not installed")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, device := range []string{"github.com/nvboot/nvboot/internal/nvinit", "github.com/nvboot/nvboot/internal/poold"} {
			if dep == device {
				t.Errorf("nvboot links %s: import image/guest instead", dep)
			}
		}
	}
	if !strings.Contains(string(out), "github.com/nvboot/nvboot/image/guest\n") {
		t.Error("nvboot does not link image/guest: is go list looking at the right package?")
	}
}
