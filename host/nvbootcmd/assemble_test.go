package nvbootcmd

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/internal/cli"
)

// TestAssembleCommand: nvboot assemble's help, its usage errors, and a root
// tree that is not ready refused with the missing file named and nothing
// written. The images it writes are checked against nvboot build's in
// buildroot-ext and yocto (TestHooksMatchNvbootBuild, TestClassConversion).
func TestAssembleCommand(t *testing.T) {
	for _, args := range [][]string{{"assemble", "-h"}, {"help", "assemble"}} {
		stdout, stderr, err := execute(args...)
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: %v", args, err)
		}
		if !strings.Contains(stdout, "Usage: nvboot assemble") || !strings.Contains(stdout, "Examples:") || stderr != "" {
			t.Errorf("%q: want usage and examples on stdout:\n%s\nstderr:\n%s", args, stdout, stderr)
		}
	}
	usage := []struct {
		args []string
		want string
	}{
		{[]string{"assemble", "-o", "x"}, "-root ROOT is required"},
		{[]string{"assemble", "-root", "r"}, "-o DIR is required"},
		{[]string{"assemble", "-root", "r", "-o", "x"}, "give -kernel (the whole image) or -in-place"},
		{[]string{"assemble", "-root", "r", "-o", "x", "-in-place", "-kernel", "k"}, "give -kernel (the whole image) or -in-place"},
		{[]string{"assemble", "-root", "r", "-o", "x", "-in-place", "-text-store-mib", "3"}, "a positive multiple of 2"},
	}
	for _, tt := range usage {
		_, _, err := execute(tt.args...)
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want a usage error saying %q", tt.args, err, tt.want)
		}
	}
	root, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	_, _, err := execute("assemble", "-in-place", "-root", root, "-o", out)
	if err == nil || !strings.Contains(err.Error(), "/etc/nvboot/config.json") {
		t.Errorf("a root tree without nvinit's config: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc", "nvboot"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "nvboot", "config.json"), []byte(`{"Hostname":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = execute("assemble", "-in-place", "-root", root, "-o", out)
	if err == nil || !strings.Contains(err.Error(), "MANIFEST") || !strings.Contains(err.Error(), "off2f-programs.sh") {
		t.Errorf("a root tree without a MANIFEST: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s written for a refused tree (%v)", out, err)
	}
}
