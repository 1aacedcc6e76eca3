// Package qemuuser runs a package's tests built for another machine under
// qemu-user, from a test on the host: what arm64 code (pmem's flush path,
// pheap) is tested with on an x86-64 build machine.
//
// qemu-user is Debian's qemu-user-static, called by name (qemu-aarch64-static):
// binfmt_misc need not be set up. -cpu chooses the emulated CPU, so one
// test binary runs on CPUs with and without a feature.
package qemuuser

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// qemuArch is qemu's name of a GOARCH's machine.
var qemuArch = map[string]string{"arm64": "aarch64"}

// Binary is a package's test binary built for GOARCH, and the qemu-user
// that runs it.
type Binary struct {
	Qemu, Path, Dir string
}

// Build cross-compiles the tests of the package in dir (a path relative to
// the calling test's package, or absolute) for goarch, with CGO_ENABLED=0,
// into a temporary directory. It skips t under -short and when
// qemu-ARCH-static is not installed, saying how to install it.
func Build(t testing.TB, dir, goarch string) Binary {
	t.Helper()
	if testing.Short() {
		t.Skip("cross-builds and emulates the package's tests")
	}
	arch, ok := qemuArch[goarch]
	if !ok {
		t.Fatalf("qemuuser: no qemu-user for GOARCH=%s", goarch)
	}
	qemu, err := exec.LookPath("qemu-" + arch + "-static")
	if err != nil {
		t.Skipf("qemu-%s-static is not installed (Debian: apt-get install qemu-user-static; make deps installs it)", arch)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(abs)+"."+goarch+".test")
	cmd := exec.Command("go", "test", "-c", "-o", out, ".")
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c GOARCH=%s in %s: %v\n%s", goarch, abs, err, b)
	}
	return Binary{Qemu: qemu, Path: out, Dir: abs}
}

// Run runs the test binary on the emulated cpu (qemu's -cpu: "max",
// "cortex-a53", ...) in the package's directory, as go test would, with
// -test.v and args, and returns its output. err is the run's error
// (*exec.ExitError when the tests failed or the program died). The
// environment is the test's without $NVBOOT_KERNEL: a test that boots an
// x86-64 guest skips (from the emulated machine it would test nothing of
// that machine).
func (b Binary) Run(t testing.TB, cpu string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(b.Qemu, append([]string{"-cpu", cpu, b.Path, "-test.v"}, args...)...)
	cmd.Dir = b.Dir
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "NVBOOT_KERNEL=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Illegal says whether out is a Go program's death by SIGILL in fn: what
// qemu-user shows for an instruction it does not emulate.
func Illegal(out, fn string) bool {
	return strings.Contains(out, "SIGILL: illegal instruction") && strings.Contains(out, fn)
}

// Version is qemu-user's version line ("qemu-aarch64 version 7.2.x ..."),
// for messages.
func (b Binary) Version() string {
	out, err := exec.Command(b.Qemu, "-version").Output()
	if err != nil {
		return fmt.Sprintf("%s (version unknown: %v)", b.Qemu, err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return line
}
