package nvbootcmd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// TestPowercutVirtioPmem: real power cuts (SIGKILL of QEMU) while the host
// writes to kv, its heap on virtio-pmem, where the kernel refuses MAP_SYNC
// and every 204 waits for the device's flush request: no acknowledged
// write may be lost, and the heap checks clean at every boot.
func TestPowercutVirtioPmem(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU four times")
	}
	if os.Getenv("NVBOOT_KERNEL") == "" {
		t.Skip("NVBOOT_KERNEL is not set (make test sets it)")
	}
	stdout, stderr, err := execute("powercut", "-n", "3", "-seed", "30", "-pmem", "virtio", "-json")
	if err != nil {
		t.Fatalf("powercut -pmem virtio: %v\n%s", err, stderr)
	}
	var res powercutResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("output %q: %v", stdout, err)
	}
	if res.Cuts != 3 || res.Lost != 0 || res.HeapChecks != 4 || res.HeapCheckFailures != 0 || res.Acked == 0 {
		t.Fatalf("result %+v: want 3 cuts, writes acknowledged, none lost, 4 clean checks", res)
	}
}

// TestRunBoards runs the demo (kv) on the two new machines, one after the
// other on the same image directory, so the second boots the pmem the
// first left: nvboot run -pmem virtio (kv's heap in pheap's msync mode,
// the kernel having refused MAP_SYNC on the asynchronous device), a key
// written; then nvboot run -board microvm (its pmem e820 regions again,
// MAP_SYNC, mode dax; virtio-mmio disk and network; the device clock its
// default under TCG), the key read back, and a clean power-off through
// microvm's ACPI.
func TestRunBoards(t *testing.T) {
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	buildtest.NeedTools(t)
	dir := filepath.Join(t.TempDir(), "kv")
	if _, stderr, err := execute("build", "-kernel", k, "-o", dir); err != nil {
		t.Fatalf("build: %v\n%s", err, stderr)
	}
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	fwd := fmt.Sprintf("%d:8080", port)
	mode := func(want string) {
		t.Helper()
		_, body, _ := kvGet(t, url, "/stats")
		var stats struct{ Mode string }
		if err := json.Unmarshal([]byte(body), &stats); err != nil || stats.Mode != want {
			t.Errorf("kv's heap in mode %q (%v), want %s", stats.Mode, err, want)
		}
	}

	r := startRun(t, "-pmem", "virtio", "-port", fwd, dir)
	r.expect("NVBOOT-MARK service-ready kv", 0)
	kvPut(t, url, "/kv/board", "written on virtio-pmem")
	mode("pheap/msync")
	r.powerOff()

	r = startRun(t, "-board", "microvm", "-port", fwd, dir)
	r.expect("NVBOOT-MARK service-ready kv", 0)
	if out := r.out.String(); !strings.Contains(out, "device clock") {
		t.Errorf("the microvm board under TCG did not take the device clock:\n%s", out)
	}
	if code, v, _ := kvGet(t, url, "/kv/board"); code != 200 || v != "written on virtio-pmem" {
		t.Errorf("GET on microvm: %d %q, want the key the virtio-pmem run wrote", code, v)
	}
	mode("pheap/dax")
	r.powerOff()
	if out := r.out.String(); !strings.Contains(out, "NVBOOT-MARK shutdown") || !strings.Contains(out, "reboot: Power down") {
		t.Errorf("no clean power-off through ACPI on microvm:\n%s", out)
	}
}

// TestPowercutMicrovm: power cuts on the microvm board (its pmem e820
// regions, its disk and network on virtio-mmio, the device clock).
func TestPowercutMicrovm(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU three times")
	}
	if os.Getenv("NVBOOT_KERNEL") == "" {
		t.Skip("NVBOOT_KERNEL is not set (make test sets it)")
	}
	stdout, stderr, err := execute("powercut", "-n", "2", "-seed", "31", "-board", "microvm", "-json")
	if err != nil {
		t.Fatalf("powercut -board microvm: %v\n%s", err, stderr)
	}
	var res powercutResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("output %q: %v", stdout, err)
	}
	if res.Cuts != 2 || res.Lost != 0 || res.HeapChecks != 3 || res.HeapCheckFailures != 0 || res.Acked == 0 {
		t.Fatalf("result %+v: want 2 cuts, writes acknowledged, none lost, 3 clean checks", res)
	}
}

// TestMeasureBoards: one measured boot on each new machine, on the device
// clock: every stage there and in boot order, and the JSON's env saying
// which board and pmem ran it.
func TestMeasureBoards(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	if os.Getenv("NVBOOT_KERNEL") == "" {
		t.Skip("NVBOOT_KERNEL is not set (make test sets it)")
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"-pmem", "virtio"}, map[string]string{"pmem": "virtio", "acpi": "off"}},
		{[]string{"-board", "microvm"}, map[string]string{"pmem": "e820", "board": "microvm", "acpi": "hardware-reduced"}},
	} {
		args := append([]string{"measure", "-clock", "device", "-layouts", "off2f", "-runs", "1", "-storage", "sd", "-json",
			"-work", filepath.Join(t.TempDir(), "work")}, c.args...)
		stdout, stderr, err := execute(args...)
		if err != nil {
			t.Fatalf("measure %q: %v\n%s", c.args, err, stderr)
		}
		var out struct {
			Env     map[string]string `json:"env"`
			Results []struct {
				Name   string  `json:"name"`
				Median float64 `json:"median"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("measure %q: %v\n%s", c.args, err, stdout)
		}
		for k, v := range c.env {
			if out.Env[k] != v {
				t.Errorf("measure %q: env %s = %q, want %q", c.args, k, out.Env[k], v)
			}
		}
		at := map[string]float64{}
		for _, r := range out.Results {
			at[r.Name] = r.Median
		}
		prev := 0.0
		for _, s := range []string{"kernel", "handover", "init", "store", "state", "service"} {
			v, ok := at["off2f."+s]
			if !ok || v < prev {
				t.Errorf("measure %q: off2f.%s = %v (present %v), want it after the stage before (%v)", c.args, s, v, ok, prev)
			}
			prev = v
		}
	}
}
