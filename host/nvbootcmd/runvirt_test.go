package nvbootcmd

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// TestRunArm64 is the arm64 appliance end to end: nvboot build -arch arm64
// of the demo (kv), nvboot run on QEMU's virt board, a key PUT and read
// back through the forwarded port, kv's heap on the device-tree pmem in
// pheap's dax mode (MAP_SYNC, flushed with DC CVAP), a clean power-off
// from the console; the next run of the same directory boots from the
// pmem the first left, and the key is there.
func TestRunArm64(t *testing.T) {
	k := vmtest.KernelArm64(t, "qemu-system-aarch64")
	buildtest.NeedTools(t)
	dir := filepath.Join(t.TempDir(), "kv-arm64")
	if _, stderr, err := execute("build", "-arch", "arm64", "-kernel", k, "-o", dir); err != nil {
		t.Fatalf("build -arch arm64: %v\n%s", err, stderr)
	}
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	args := []string{"-port", fmt.Sprintf("%d:8080", port), dir}

	r := startRun(t, args...)
	r.expect("NVBOOT-MARK service-ready kv", 0)
	if !strings.Contains(r.out.String(), "Booting Linux") && !strings.Contains(r.out.String(), "NVBOOT-MARK init") {
		t.Errorf("no kernel or nvinit on the console:\n%s", r.out.String())
	}
	kvPut(t, url, "/kv/greeting", "hello from arm64")
	if code, v, _ := kvGet(t, url, "/kv/greeting"); code != 200 || v != "hello from arm64" {
		t.Fatalf("GET after PUT: %d %q", code, v)
	}
	_, body, _ := kvGet(t, url, "/stats")
	var stats struct{ Mode, State string }
	if err := json.Unmarshal([]byte(body), &stats); err != nil || stats.Mode != "pheap/dax" || !strings.HasPrefix(stats.State, "/nv/state/") {
		t.Errorf("kv's state %q in mode %q (%v): want pheap/dax on /nv/state", stats.State, stats.Mode, err)
	}
	r.powerOff()
	if out := r.out.String(); !strings.Contains(out, "NVBOOT-MARK shutdown") || !strings.Contains(out, "reboot: Power down") {
		t.Errorf("no clean power-off (nvinit's shutdown, PSCI's power down):\n%s", out)
	}

	r = startRun(t, args...)
	r.expect("NVBOOT-MARK service-ready kv", 0)
	if code, v, _ := kvGet(t, url, "/kv/greeting"); code != 200 || v != "hello from arm64" {
		t.Errorf("GET after a power-off and a new boot: %d %q, want the key kept on pmem", code, v)
	}
	r.powerOff()
}
