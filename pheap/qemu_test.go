//go:build !arm64

package pheap

import (
	"strings"
	"testing"

	"github.com/nvboot/nvboot/internal/testutil/qemuuser"
)

// TestArm64UnderQemuUser runs this package's tests built for arm64 under
// qemu-user, the crash simulations with them, on two CPUs: cortex-a53 (no
// DCPoP: TestCPUFlushPath commits through DC CVAC) and max (DCPoP: DC
// CVAP). The layout, the checksums, the allocator and recovery run on a
// machine with other alignment and memory-ordering rules than x86-64's.
// Emulated, the crash simulations take minutes at their full size: they
// run at -short's (40 operations, every crash state of them checked), at
// full size with -long. qemu-user before 8.1 does not emulate DC CVAP in
// user mode (SIGILL): then the max run is skipped, saying so (pmem's
// TestArm64UnderQemuUser checks that dc cvap is chosen there).
func TestArm64UnderQemuUser(t *testing.T) {
	bin := qemuuser.Build(t, ".", "arm64")
	size := []string{"-test.short"}
	if *long {
		size = []string{"-long", "-test.timeout=60m"}
	}
	for _, c := range []struct{ cpu, method string }{{"cortex-a53", "dc cvac"}, {"max", "dc cvap"}} {
		t.Run(c.cpu, func(t *testing.T) {
			out, err := bin.Run(t, c.cpu, "-test.count=1", "-test.run=^TestCPUFlushPath$")
			if err != nil && c.method == "dc cvap" && qemuuser.Illegal(out, "flushCVAP") {
				t.Skipf("%s does not emulate DC CVAP in user mode (SIGILL; QEMU 8.1 does): pheap's tests on a DCPoP CPU did not run", bin.Version())
			}
			if err != nil || !strings.Contains(out, "transactions flushed with "+c.method) {
				t.Fatalf("-cpu %s: TestCPUFlushPath did not commit through %s: %v\n%s", c.cpu, c.method, err, out)
			}
			out, err = bin.Run(t, c.cpu, append([]string{"-test.count=1"}, size...)...)
			if err != nil || !strings.Contains(out, "\nPASS\n") {
				t.Fatalf("-cpu %s: %v\n%s", c.cpu, err, out)
			}
			for _, test := range []string{"TestCrashStates", "TestCrashAllocator", "TestCrashCollections", "TestCPUFlushPath"} {
				if !strings.Contains(out, "--- PASS: "+test+" ") {
					t.Errorf("-cpu %s: %s did not pass:\n%s", c.cpu, test, out)
				}
			}
		})
	}
}
