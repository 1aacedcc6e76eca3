package nvbootcmd

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
	"github.com/nvboot/nvboot/internal/testutil/registry"
)

// TestPullABUpdateUEFI is nvpull's A/B path end to end, one cycle: a
// Slots 2 demo pushed to a real registry and booted through OVMF (nvboot
// run -firmware uefi) pulling its tag; an image of another base (another
// kernel command line, and kv changed) is pushed. The appliance downloads
// its root filesystem and slot b's boot partition, writes them into the
// inactive slot, test-boots it within the same run, and nvinit commits it:
// the puller then says it runs the new image by the update path, the
// endpoint says slot b runs that image's id, committed, kv answers with
// its new version, and the write acknowledged before the pull reads back.
func TestPullABUpdateUEFI(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU through OVMF, builds two images")
	}
	buildtest.NeedTools(t, "fsck.erofs")
	kernel := vmtest.Kernel(t)
	if err := vm.UEFIOf(vm.ArchX86_64).Installed(); err != nil {
		t.Skip(err)
	}
	reg := registry.Start(t)
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig(t, reg.Password))
	cfgDir := t.TempDir()
	ref := reg.Host + "/fleet/ab:stable"
	write := func(version, cmdline string, flags ...string) string {
		c := config.Demo()
		pc := c.PackageConfig[kvPackage]
		pc.GoBuildFlags = flags
		c.PackageConfig[kvPackage] = pc
		c.Version, c.KernelCmdline = version, cmdline
		c.Slots, c.TestBootDeadline = 2, "90s"
		c.Update = &config.Update{HTTPPassword: "test", Registry: &config.Registry{Repository: reg.GuestHost() + "/fleet/ab", Tag: "stable",
			PollInterval: "2s", Credentials: reg.DockerConfigFor(t, reg.GuestHost()), CACert: reg.CAFile}}
		p := filepath.Join(cfgDir, "appliance.json")
		if err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1Dir := filepath.Join(t.TempDir(), "img")
	res1, _ := pushed(t, "-config", write("1.0.0", ""), "-kernel", kernel, "-ca", reg.CAFile, "-o", v1Dir, ref)

	kvPort, upPort := freePort(t), freePort(t)
	kvURL, upURL := fmt.Sprintf("http://127.0.0.1:%d", kvPort), fmt.Sprintf("http://127.0.0.1:%d", upPort)
	r := startRun(t, "-firmware", "uefi", "-port", fmt.Sprintf("%d:8080", kvPort), "-port", fmt.Sprintf("%d:%d", upPort, contract.DefaultUpdatePort), v1Dir)
	at := r.expect("NVBOOT-MARK slot-committed a", 0)
	r.expect("NVBOOT-MARK service-ready kv", at)
	kvPut(t, kvURL, "/kv/greeting", "written before the pull")
	cfg := filepath.Join(cfgDir, "appliance.json")
	waitRunning(t, r.out.String, cfg, upURL, res1.Digest, 5*time.Minute)

	v2Dir := filepath.Join(t.TempDir(), "img")
	res2, _ := pushed(t, "-config", write("1.1.0", "nvtest.pulled=v2", kvVersion("2")), "-kernel", kernel, "-ca", reg.CAFile, "-o", v2Dir, ref)
	v2Im, err := appliance.ReadImage(v2Dir)
	if err != nil {
		t.Fatal(err)
	}
	r.expect("NVBOOT-MARK slot-trial b", at)
	st := waitRunning(t, r.out.String, cfg, upURL, res2.Digest, 10*time.Minute)
	if li := st.LastInstall; st.Running.Path != contract.PullUpdate || li == nil || li.Path != contract.PullUpdate {
		t.Errorf("v2 is running by %q, its install %+v; want the update path", st.Running.Path, li)
	}
	f, err := (&deploy.Client{URL: upURL, Password: "test"}).Features(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f.Slot != "b" || f.Image != v2Im.ID || !f.Committed {
		t.Errorf("the appliance runs slot %q image %s (committed %v); want slot b image %s, committed", f.Slot, f.Image, f.Committed, v2Im.ID)
	}
	if code, _, ver := kvGet(t, kvURL, "/healthz"); code != 200 || ver != "2" {
		t.Errorf("kv after the pull: %d, version %q; want 2", code, ver)
	}
	if code, v, _ := kvGet(t, kvURL, "/kv/greeting"); code != 200 || v != "written before the pull" {
		t.Errorf("the acknowledged write after the A/B pull: %d %q", code, v)
	}
	r.powerOff()
}
