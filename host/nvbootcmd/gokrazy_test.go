package nvbootcmd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// A gokrazy instance config is taken as it is. The build's first line says
// the target and why: `gok new`'s GOARCH=arm64 with gokrazy's default
// firmware is the Raspberry Pi, and its second what a Pi image is (here
// the off2f layout is asked for, which a Pi cannot have, so the build is
// refused before anything is written; TestBuildGokrazyPi builds one); -arch
// names another target, over the config's GOARCH. An unknown key and a
// field nvboot does not apply are each said once, on stderr, before the
// build.
func TestBuildGokrazyConfig(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	_, stderr, err := execute("build", "-config", "../image/config/testdata/gokrazy/gok-new.json", "-layout", "off2f", "-o", out)
	if err == nil || !strings.Contains(err.Error(), "layout off2f on a Raspberry Pi") {
		t.Errorf("gok new's config, off2f: %v, want the layout refused for the Pi", err)
	}
	first, rest, _ := strings.Cut(stderr, "\n")
	if !strings.HasPrefix(first, "target arm64-rpi, ") || !strings.Contains(first, `"GOARCH=arm64"`) {
		t.Errorf("first line %q: want the target and the GOARCH that chose it", first)
	}
	if second, _, _ := strings.Cut(rest, "\n"); second != appliance.RPiImage {
		t.Errorf("second line %q: want what a Pi image is", second)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output directory left behind: %v", err)
	}
	cfg := filepath.Join(dir, "config.json")
	// A library, not a program: the build stops at go build, after the
	// warnings. A stand-in kernel, so that no kernel is looked up (or built).
	os.WriteFile(cfg, []byte(`{"Hostname": "gk", "Packages": ["github.com/nvboot/nvboot/internal/filemode"],
		"Colour": "red", "SerialConsole": "off", "Environment": ["GOARCH=amd64"]}`), 0o644)
	_, stderr, err = execute("build", "-config", cfg, "-kernel", buildtest.FakeKernel(t), "-o", out)
	if err == nil || !strings.Contains(err.Error(), "not package main") {
		t.Errorf("a library as a service: %v, want an error saying it is not package main", err)
	}
	for _, w := range []string{"warning: Colour: unknown field", `warning: SerialConsole "off"`} {
		if n := strings.Count(stderr, w); n != 1 {
			t.Errorf("%q said %d times, want once; stderr:\n%s", w, n, stderr)
		}
	}
	if !strings.HasPrefix(stderr, "target amd64-pc, ") {
		t.Errorf("stderr starts %q, want the target", stderr)
	}
	_, stderr, err = execute("build", "-arch", "arm64-virt", "-config", cfg, "-kernel", buildtest.FakeKernelFor(t, "arm64"), "-o", out)
	if err == nil || !strings.Contains(err.Error(), "not package main") {
		t.Errorf("-arch arm64-virt: %v, want the build to reach go build", err)
	}
	if want := `target arm64-virt, an arm64 board with UEFI firmware (QEMU's virt): -arch arm64-virt, over the config's Environment[0] "GOARCH=amd64"`; !strings.HasPrefix(stderr, want) {
		t.Errorf("stderr starts %q, want %q", stderr, want)
	}
	// An x86 kernel for an arm64 image, and riscv64, each refused by name.
	if _, _, err := execute("build", "-arch", "arm64-virt", "-config", cfg, "-kernel", buildtest.FakeKernel(t), "-o", out); err == nil || !strings.Contains(err.Error(), "not an arm64 Image") {
		t.Errorf("-arch arm64-virt with an x86 kernel: %v", err)
	}
	os.WriteFile(cfg, []byte(`{"Hostname": "gk", "Packages": ["github.com/nvboot/nvboot/internal/filemode"], "Environment": ["GOARCH=riscv64"]}`), 0o644)
	if _, _, err := execute("build", "-config", cfg, "-kernel", buildtest.FakeKernel(t), "-o", out); err == nil || !strings.Contains(err.Error(), `Environment[0] "GOARCH=riscv64"`) {
		t.Errorf("GOARCH=riscv64: %v, want it named", err)
	}
}
