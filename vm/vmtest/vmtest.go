// Package vmtest is what tests that boot QEMU share: finding the kernel.
package vmtest

import (
	"os"
	"os/exec"
	"testing"
)

// Kernel returns $NVBOOT_KERNEL, the bzImage make test builds and sets, for
// a test that boots QEMU. The test is skipped under -short, when the
// variable is unset, or when one of tools is not installed; it fails when
// the variable names no file.
func Kernel(t testing.TB, tools ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("boots QEMU (-short)")
	}
	k := os.Getenv("NVBOOT_KERNEL")
	if k == "" {
		t.Skip("NVBOOT_KERNEL unset (make test sets it; or: export NVBOOT_KERNEL=$(kernel-config/build.sh)/bzImage)")
	}
	if _, err := os.Stat(k); err != nil {
		t.Fatalf("NVBOOT_KERNEL: %v", err)
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	return k
}
