package vmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
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
	return kernelFor(t, kernel.ArchX86_64, tools)
}

// KernelArm64 is Kernel for the arm64 kernel: $NVBOOT_KERNEL_ARM64, the
// Image make test builds and sets (kernel-config/build.sh -arch arm64).
func KernelArm64(t testing.TB, tools ...string) string {
	t.Helper()
	return kernelFor(t, kernel.ArchArm64, tools)
}

func kernelFor(t testing.TB, arch string, tools []string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("boots QEMU (-short)")
	}
	k, err := kernel.Find(context.Background(), kernel.Lookup{Arch: arch})
	if errors.Is(err, kernel.ErrNone) {
		if arch == kernel.ArchArm64 {
			t.Skip("NVBOOT_KERNEL_ARM64 unset: no arm64 kernel (make test sets it; or: export NVBOOT_KERNEL_ARM64=$(kernel-config/build.sh -arch arm64)/Image)")
		}
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
	return StaticProgramFor(t, dir, "")
}

// StaticProgramFor is StaticProgram cross-built for goarch ("arm64" for an
// arm64 guest; "": the host's).
func StaticProgramFor(t testing.TB, dir, goarch string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(dir))
	build := exec.Command("go", "build", "-o", bin, dir)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if goarch != "" {
		build.Env = append(build.Env, "GOARCH="+goarch)
	}
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", dir, err, out)
	}
	return bin
}

// built holds the programs StaticBytes built, by package directory.
var built sync.Map // dir -> *builtProgram

type builtProgram struct {
	once sync.Once
	bin  []byte
	err  error
}

// StaticBytes is StaticProgram's binary, built once per test binary for
// each dir: for tests that write the same program into many fixtures.
func StaticBytes(t testing.TB, dir string) []byte {
	t.Helper()
	v, _ := built.LoadOrStore(dir, &builtProgram{})
	p := v.(*builtProgram)
	p.once.Do(func() {
		tmp, err := os.MkdirTemp("", "vmtest-")
		if err != nil {
			p.err = err
			return
		}
		defer os.RemoveAll(tmp)
		bin := filepath.Join(tmp, filepath.Base(dir))
		build := exec.Command("go", "build", "-o", bin, dir)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			p.err = fmt.Errorf("building %s: %v\n%s", dir, err, out)
			return
		}
		p.bin, p.err = os.ReadFile(bin)
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.bin
}
