package nvbootcmd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// A gokrazy instance config is taken as it is: `gok new`'s GOARCH=arm64 is
// refused before anything is written, naming it; an unknown key and a field
// nvboot does not apply are each said once, on stderr, before the build.
func TestBuildGokrazyConfig(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	_, _, err := execute("build", "-config", "../image/config/testdata/gokrazy/gok-new.json", "-o", out)
	if err == nil || !strings.Contains(err.Error(), "GOARCH=arm64") {
		t.Errorf("gok new's config: %v, want an error naming GOARCH=arm64", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output directory left behind: %v", err)
	}
	cfg := filepath.Join(dir, "config.json")
	// A library, not a program: the build stops at go build, after the
	// warnings. A stand-in kernel, so that no kernel is looked up (or built).
	os.WriteFile(cfg, []byte(`{"Hostname": "gk", "Packages": ["github.com/nvboot/nvboot/internal/filemode"],
		"Colour": "red", "SerialConsole": "off", "Environment": ["GOARCH=amd64"]}`), 0o644)
	_, stderr, err := execute("build", "-config", cfg, "-kernel", buildtest.FakeKernel(t), "-o", out)
	if err == nil || !strings.Contains(err.Error(), "not package main") {
		t.Errorf("a library as a service: %v, want an error saying it is not package main", err)
	}
	for _, w := range []string{"warning: Colour: unknown field", `warning: SerialConsole "off"`} {
		if n := strings.Count(stderr, w); n != 1 {
			t.Errorf("%q said %d times, want once; stderr:\n%s", w, n, stderr)
		}
	}
}
