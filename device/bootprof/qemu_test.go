//go:build !arm64

package bootprof

import (
	"strings"
	"testing"

	"github.com/nvboot/nvboot/internal/testutil/qemuuser"
)

// TestArm64TSCUnderQemuUser runs the tsc mark's test built for arm64 under
// qemu-user: the generic timer's counter and frequency are read at EL0 and
// the mark carries their nanoseconds.
func TestArm64TSCUnderQemuUser(t *testing.T) {
	bin := qemuuser.Build(t, ".", "arm64")
	out, err := bin.Run(t, "cortex-a76", "-test.count=1", "-test.run=^(TestMarkTSC|TestCounterNS)$")
	if err != nil || !strings.Contains(out, "--- PASS: TestMarkTSC") || !strings.Contains(out, "--- PASS: TestCounterNS") {
		t.Fatalf("%v\n%s", err, out)
	}
}
