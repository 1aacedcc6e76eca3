//go:build !arm64

package cpucounter

import (
	"strings"
	"testing"

	"github.com/nvboot/nvboot/internal/testutil/qemuuser"
)

// TestArm64UnderQemuUser runs this package's tests built for arm64 under
// qemu-user: the generic timer's count and frequency are read at EL0 and
// converted exactly.
func TestArm64UnderQemuUser(t *testing.T) {
	bin := qemuuser.Build(t, ".", "arm64")
	out, err := bin.Run(t, "cortex-a76", "-test.count=1", "-test.v", "-test.run=^(TestNS|TestReadMonotonic)$")
	if err != nil || !strings.Contains(out, "--- PASS: TestNS") || !strings.Contains(out, "--- PASS: TestReadMonotonic") {
		t.Fatalf("%v\n%s", err, out)
	}
}
