package nvbootcmd

import (
	"encoding/json"
	"os"
	"testing"
)

// Five real power cuts (SIGKILL of QEMU) while the host writes to kv on
// pheap: every acknowledged write must be there after each reboot.
func TestPowercut(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU six times")
	}
	if os.Getenv("NVBOOT_KERNEL") == "" {
		t.Skip("NVBOOT_KERNEL is not set (make test sets it)")
	}
	stdout, stderr, err := execute("powercut", "-n", "5", "-seed", "42", "-json")
	if err != nil {
		t.Fatalf("powercut: %v\n%s", err, stderr)
	}
	var res powercutResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("output %q: %v", stdout, err)
	}
	if res.Cuts != 5 || res.Lost != 0 {
		t.Fatalf("result %+v", res)
	}
	if res.Acked == 0 {
		t.Fatalf("no write was acknowledged before the cuts: nothing was tested (%+v)", res)
	}
}
