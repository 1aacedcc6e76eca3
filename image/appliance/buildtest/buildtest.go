// Package buildtest is what tests that build appliance images share: the
// host tools a build runs, and a stand-in kernel.
package buildtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// tools are what image/appliance runs to build an image (make deps
// installs them).
var tools = []string{"mke2fs", "debugfs", "mkfs.erofs", "mkfs.vfat", "mcopy", "objcopy", "go", "make", "gcc"}

// EFIStub is systemd's EFI stub, which the build makes the unified kernel
// image from (Debian package systemd-boot-efi).
const EFIStub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

// NeedTools skips the test unless the build's tools and extra are installed.
func NeedTools(t testing.TB, extra ...string) {
	t.Helper()
	for _, tool := range append(append([]string(nil), tools...), extra...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (make deps)", tool)
		}
	}
	if _, err := os.Stat(EFIStub); err != nil {
		t.Skipf("%s not installed (make deps; Debian package systemd-boot-efi)", EFIStub)
	}
}

// FakeKernel stands in for the bzImage: a file with the boot-protocol
// signature ("HdrS" at 0x202), which is what the build checks before it
// copies the kernel in.
func FakeKernel(t testing.TB) string {
	t.Helper()
	b := bytes.Repeat([]byte("nvboot kernel "), 4096)
	copy(b[0x202:], "HdrS")
	p := filepath.Join(t.TempDir(), "bzImage")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
