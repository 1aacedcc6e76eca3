package vmtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nvboot/nvboot/host/kernel"
)

// Kernel returns $NVBOOT_KERNEL, the bzImage make test builds and sets, for
// a test that boots QEMU. The test is skipped under -short, when the
// variable is unset, or when one of tools is not installed; it fails when
// the variable names no bzImage. It never looks in kernel-config/'s cache:
// a plain go test boots nothing unless asked to.
func Kernel(t testing.TB, tools ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("boots QEMU (-short)")
	}
	k, err := kernel.Find(context.Background(), kernel.Lookup{})
	if errors.Is(err, kernel.ErrNone) {
		t.Skip("NVBOOT_KERNEL unset (make test sets it; or: export NVBOOT_KERNEL=$(kernel-config/build.sh)/bzImage)")
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	return k
}

// StaticProgram builds the main package in dir (relative to the test's
// package, e.g. "./testdata/daxheap") as a static executable for a guest
// (CGO_ENABLED=0) and returns its path in a temporary directory.
func StaticProgram(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(dir))
	build := exec.Command("go", "build", "-o", bin, dir)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", dir, err, out)
	}
	return bin
}
