package nvbootcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm"
)

// TestRunUEFIUpdateArm64 is the arm64 A/B update end to end, one cycle:
// nvboot run -firmware uefi boots an arm64 Slots 2 image on the virt board
// through AAVMF (its disk's UKI, the pmem as NVDIMMs the firmware's ACPI
// NFIT describes: kv's heap in pheap's dax mode, MAP_SYNC on fsdax);
// nvboot update sends the v2 image, the board resets within the run into
// slot B on trial, nvinit commits it, kv answers version 2 with the key
// written under v1; then nvboot deploy replaces kv on the committed slot
// without a reboot, built for arm64 from its config, and the deployed kv
// answers, the key still there.
func TestRunUEFIUpdateArm64(t *testing.T) {
	start := time.Now()
	phase := func(what string) {
		t.Logf("%6.1fs %s", time.Since(start).Seconds(), what)
	}
	s := newSlotImagesFor(t, vm.ArchArm64)
	if s.v1Im.Arch != "arm64" || s.v2Im.Arch != "arm64" {
		t.Fatalf("images built for %s and %s, want arm64", s.v1Im.Arch, s.v2Im.Arch)
	}
	phase("built v1 and v2 (arm64, Slots 2)")
	kvPort, upPort := freePort(t), freePort(t)
	kvURL, upURL := fmt.Sprintf("http://127.0.0.1:%d", kvPort), fmt.Sprintf("http://127.0.0.1:%d", upPort)
	features := func() *contract.Features {
		t.Helper()
		f, err := (&deploy.Client{URL: upURL, Password: "test"}).Features(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return f
	}

	r := startRun(t, "-firmware", "uefi", "-port", fmt.Sprintf("%d:8080", kvPort), "-port", fmt.Sprintf("%d:%d", upPort, contract.DefaultUpdatePort), s.v1Dir)
	at := r.expect("NVBOOT-MARK slot-committed a", 0)
	r.expect("NVBOOT-MARK service-ready kv", at)
	phase("v1 up through AAVMF, slot a committed")
	if out := r.out.String(); !strings.Contains(out, "UEFI firmware (AAVMF)") || !strings.Contains(out, "watchdog armed") {
		t.Errorf("not the arm64 UEFI board with its watchdog:\n%s", out)
	}
	if f := features(); f.Arch != "arm64" || f.Slot != "a" || f.Image != s.v1Im.ID || !f.Committed {
		t.Errorf("features %+v: want arm64, slot a, image %s, committed", f, s.v1Im.ID)
	}
	_, body, _ := kvGet(t, kvURL, "/stats")
	var stats struct{ Mode string }
	if err := json.Unmarshal([]byte(body), &stats); err != nil || stats.Mode != "pheap/dax" {
		t.Errorf("kv's heap in mode %q (%v): want pheap/dax, MAP_SYNC on the NVDIMM's fsdax namespace", stats.Mode, err)
	}
	kvPut(t, kvURL, "/kv/greeting", "written under v1")

	stdout, stderr, err := execute("update", "-json", "-config", s.v2, s.v2Dir, upURL)
	var rep updateReport
	json.Unmarshal([]byte(stdout), &rep)
	if err != nil || rep.Result != UpdateCommitted || rep.From != (SlotImage{"a", s.v1Im.ID}) || rep.To != (SlotImage{"b", s.v2Im.ID}) {
		t.Fatalf("update: %v, %+v\n%s", err, rep, stderr)
	}
	phase(fmt.Sprintf("update committed (%d bytes sent, %v)", rep.BytesSent, rep.Elapsed.Round(time.Second)))
	select {
	case <-r.done:
		t.Fatalf("the run ended at the update's reboot: %v", r.err)
	default:
	}
	r.expect("NVBOOT-MARK slot-trial b", at)
	if f := features(); f.Slot != "b" || f.Image != s.v2Im.ID || !f.Committed {
		t.Errorf("after the update: slot %q image %s committed %v; want slot b, image %s, committed", f.Slot, f.Image, f.Committed, s.v2Im.ID)
	}
	if code, _, ver := kvGet(t, kvURL, "/healthz"); code != 200 || ver != "2" {
		t.Errorf("kv after the update: %d, version %q; want 2", code, ver)
	}
	if code, v, _ := kvGet(t, kvURL, "/kv/greeting"); code != 200 || v != "written under v1" {
		t.Errorf("the key after the update: %d %q; the state is both slots'", code, v)
	}

	v3 := slotConfig(t, s.cfgDir, "v3", func(c *config.Config, pc *config.PackageConfig) {
		c.Environment = []string{"GOARCH=arm64"}
		pc.GoBuildFlags = []string{"-ldflags=-s -w -buildid= -X=main.version=3"}
	})
	stdout, stderr, err = execute("deploy", "-json", "-service", "kv", "-config", v3, "-src", s.root, upURL)
	var dep deployReport
	json.Unmarshal([]byte(stdout), &dep)
	if err != nil || dep.Result != contract.DeployKept || !dep.TextSent {
		t.Fatalf("deploy of kv 3: %v, %+v\n%s", err, dep, stderr)
	}
	phase("deploy kept")
	if code, _, ver := kvGet(t, kvURL, "/healthz"); code != 200 || ver != "3" {
		t.Errorf("kv after the deploy: %d, version %q; want 3", code, ver)
	}
	if code, v, _ := kvGet(t, kvURL, "/kv/greeting"); code != 200 || v != "written under v1" {
		t.Errorf("the key after the deploy: %d %q", code, v)
	}
	r.powerOff()
	phase("powered off")
}
