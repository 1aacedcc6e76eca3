//go:build !arm64

package pmem

import (
	"strings"
	"testing"

	"github.com/nvboot/nvboot/internal/testutil/qemuuser"
)

// TestArm64UnderQemuUser runs this package's tests built for arm64 under
// qemu-user on two CPUs: cortex-a53 (ARMv8.0, without DCPoP), where Flush
// must be DC CVAC, and max (ARMv8.2 DCPoP and later), where it must be DC
// CVAP; every flush variant the CPU has runs (TestFlushVariants) and the
// DSB fence with it. qemu-user before 8.1 advertises DCPoP but does not
// emulate DC CVAP in user mode (it dies of SIGILL there): then the choice
// of dc cvap is checked and its run skipped, saying so.
func TestArm64UnderQemuUser(t *testing.T) {
	bin := qemuuser.Build(t, ".", "arm64")
	for _, c := range []struct {
		cpu, method string
		variants    []string
	}{
		{"cortex-a53", "dc cvac", []string{"dc_cvac"}},
		{"max", "dc cvap", []string{"dc_cvac", "dc_cvap"}},
	} {
		t.Run(c.cpu, func(t *testing.T) {
			out, err := bin.Run(t, c.cpu, "-test.count=1")
			if !strings.Contains(out, `method "`+c.method+`"`) {
				t.Fatalf("-cpu %s: Flush is not %s:\n%s", c.cpu, c.method, out)
			}
			if err != nil && c.method == "dc cvap" && qemuuser.Illegal(out, "flushCVAP") {
				t.Skipf("-cpu %s chose dc cvap, as it should; %s does not emulate DC CVAP in user mode (SIGILL; QEMU 8.1 does), so it did not run", c.cpu, bin.Version())
			}
			if err != nil || !strings.Contains(out, "\nPASS\n") {
				t.Fatalf("-cpu %s: %v\n%s", c.cpu, err, out)
			}
			for _, v := range c.variants {
				if !strings.Contains(out, "--- PASS: TestFlushVariants/"+v) {
					t.Errorf("-cpu %s: %s did not run:\n%s", c.cpu, v, out)
				}
			}
		})
	}
}
