//go:build !arm64

package pheap

import (
	"strings"
	"testing"

	"github.com/nvboot/nvboot/internal/testutil/qemuuser"
)

// TestArm64UnderQemuUser runs this package's tests built for arm64 under
// qemu-user, the crash simulations with them: on cortex-a53 (no DCPoP:
// TestCPUFlushPath commits through DC CVAC) in full, and on max (DCPoP:
// DC CVAP) with -test.short, which bounds the crash simulations; the
// layout, the checksums and the allocator run on a 64-bit machine with
// other alignment and memory-ordering rules than x86-64's. qemu-user
// before 8.1 does not emulate DC CVAP in user mode (SIGILL): then the max
// run is skipped, saying so (pmem's TestArm64UnderQemuUser checks the
// choice of dc cvap there).
func TestArm64UnderQemuUser(t *testing.T) {
	bin := qemuuser.Build(t, ".", "arm64")
	for _, c := range []struct {
		cpu, method string
		args        []string
	}{
		{"cortex-a53", "dc cvac", nil},
		{"max", "dc cvap", []string{"-test.short"}},
	} {
		t.Run(c.cpu, func(t *testing.T) {
			out, err := bin.Run(t, c.cpu, append([]string{"-test.count=1", "-test.timeout=20m"}, c.args...)...)
			if err != nil && c.method == "dc cvap" && qemuuser.Illegal(out, "flushCVAP") {
				t.Skipf("%s does not emulate DC CVAP in user mode (SIGILL; QEMU 8.1 does): pheap's tests on a DCPoP CPU did not run", bin.Version())
			}
			if err != nil || !strings.Contains(out, "\nPASS\n") {
				t.Fatalf("-cpu %s: %v\n%s", c.cpu, err, out)
			}
			for _, want := range []string{"--- PASS: TestCrashStates", "--- PASS: TestCrashAllocator", "--- PASS: TestCrashCollections",
				"--- PASS: TestCPUFlushPath", "transactions flushed with " + c.method} {
				if !strings.Contains(out, want) {
					t.Errorf("-cpu %s: no %q in the output:\n%s", c.cpu, want, out)
				}
			}
		})
	}
}
