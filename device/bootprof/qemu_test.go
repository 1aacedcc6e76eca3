//go:build !arm64

package bootprof

import (
	"strings"
	"testing"

	"github.com/nvboot/nvboot/internal/testutil/qemuuser"
)

// TestArm64TSCUnderQemuUser runs the tsc mark's test built for arm64 under
// qemu-user: the mark carries the generic timer's count in nanoseconds
// (internal/cpucounter reads it at EL0).
func TestArm64TSCUnderQemuUser(t *testing.T) {
	bin := qemuuser.Build(t, ".", "arm64")
	out, err := bin.Run(t, "cortex-a76", "-test.count=1", "-test.run=^TestMarkTSC$")
	if err != nil || !strings.Contains(out, "--- PASS: TestMarkTSC") {
		t.Fatalf("%v\n%s", err, out)
	}
}
