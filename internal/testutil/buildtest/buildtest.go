package buildtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
)

// NeedTools skips the test unless the tools of every build (config.Tools,
// as make deps installs them) and extra are installed.
func NeedTools(t testing.TB, extra ...string) {
	t.Helper()
	if err := config.CheckTools((&config.Config{}).Tools(config.Needs{RootImage: true, Loader: true})); err != nil {
		t.Skipf("%v", err)
	}
	for _, tool := range extra {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (make deps)", tool)
		}
	}
}

// FakeKernel stands in for the bzImage: a file with the boot-protocol
// signature ("HdrS" at 0x202), which is what the build checks before it
// copies the kernel in.
func FakeKernel(t testing.TB) string { return FakeKernelFor(t, "amd64") }

// FakeKernelFor is FakeKernel for goarch: for arm64 a stand-in Image, with
// the arm64 Image magic ("ARM\x64" at 0x38).
func FakeKernelFor(t testing.TB, goarch string) string {
	t.Helper()
	b := bytes.Repeat([]byte("nvboot kernel "), 4096)
	name := "bzImage"
	if goarch == "arm64" {
		copy(b[0x38:], "ARM\x64")
		name = "Image"
	} else {
		copy(b[0x202:], "HdrS")
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
