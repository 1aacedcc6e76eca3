package appliance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/tryboot"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/internal/testutil/raspi"
)

// TestRPiTestBootInQEMU is the device's side of nvboot update on a Pi, in
// raspi3b with the test playing the firmware. The card's two slots hold
// the image as built, so slot B needs no new bytes: the test sends the
// update endpoint the first MiB of slot B's root and boot partitions (the
// bytes they hold already: raspi3b's USB network carries about 100 KiB/s,
// too slow for whole partitions; the UEFI board's tests send whole
// images), which the endpoint writes and reads back, then asks for the test
// boot and the reboot. The kernel restarts with "0 tryboot", the firmware
// boots slot B once, nvinit commits it; a power cycle boots slot B. Then a
// test boot of slot A whose root cannot be mounted panics, and the next
// power-on boots slot B again by itself, autoboot.txt unchanged.
func TestRPiTestBootInQEMU(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-aarch64"); err != nil {
		t.Skip("qemu-system-aarch64 not installed (qemu-system-arm)")
	}
	c := rpiConfig(t, 2)
	c.Update = &config.Update{HTTPPassword: "test"}
	c.Interfaces = []config.Interface{{Name: raspi.NetInterface, Address: raspi.NetAddress, Gateway: raspi.NetGateway}}
	dir, im := buildRPi(t, c)
	disk := filepath.Join(dir, im.Disk)
	b := raspi.New(t, disk)
	cl := &deploy.Client{URL: fmt.Sprintf("http://127.0.0.1:%d", b.Forward(contract.DefaultUpdatePort)), Password: "test"}
	b.PowerOn()
	b.Expect("NVBOOT-MARK slot-committed a", 5*time.Minute)
	b.Expect("NVBOOT-MARK service-ready kv", 3*time.Minute)
	ctx := context.Background()
	f, err := cl.Features(ctx)
	if err != nil || f.Slot != "a" || !f.Committed || f.Image != im.ID || f.Arch != "arm64" || f.BootBytes != im.Part(contract.PartBootB).Bytes {
		t.Fatalf("features: %+v, %v", f, err)
	}
	img, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	var sums []string
	for _, w := range []struct{ path, part string }{{contract.PathRoot, contract.PartRootB}, {contract.PathBoot, contract.PartBootB}} {
		head := make([]byte, 1<<20)
		if _, err := img.ReadAt(head, im.Part(w.part).Offset); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(head)
		res, err := cl.WritePartition(ctx, w.path, deploy.Partition{R: bytes.NewReader(head), Size: int64(len(head)), SHA256: hex.EncodeToString(sum[:]), Arch: im.Arch})
		if err != nil || res.Partition != w.part || res.Device != contract.RPiDevice(2, w.part) {
			t.Fatalf("%s: %+v, %v", w.path, res, err)
		}
		sums = append(sums, res.SHA256)
	}
	if tb, err := cl.TestBoot(ctx, sums[0], sums[1]); err != nil || tb.Slot != "b" {
		t.Fatalf("test boot: %+v, %v", tb, err)
	}
	if err := cl.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	if l := b.Restart(5 * time.Minute); !strings.Contains(l, "with command '0 tryboot'") {
		t.Fatalf("the update's reboot: %q, want the tryboot command", l)
	}
	if part := b.PowerOn(); part != contract.RPiPartNumber(2, contract.PartBootB) {
		t.Fatalf("with the tryboot flag the firmware booted partition %d", part)
	}
	b.Expect("NVBOOT-MARK slot-trial b", 5*time.Minute)
	b.Expect("slot b: every service is ready: committed", 5*time.Minute)
	b.PowerOff()
	if a, _ := b.Autoboot(); a != (tryboot.Autoboot{Boot: 3, TryBoot: 2, AB: true}) {
		t.Fatalf("autoboot.txt after the commit: %+v", a)
	}
	b.PowerOn()
	b.Expect("NVBOOT-MARK slot-committed b", 5*time.Minute)
	b.PowerOff()

	// Slot A's root damaged (its superblock zeroed), then tried: the
	// kernel cannot mount it and panics, the flag is spent, and the next
	// power-on boots the committed slot B.
	sd, err := os.OpenFile(b.SD, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sd.WriteAt(make([]byte, 4096), im.Part(contract.PartRootA).Offset); err != nil {
		t.Fatal(err)
	}
	sd.Close()
	b.SetTryboot()
	if part := b.PowerOn(); part != contract.RPiPartNumber(2, contract.PartBootA) {
		t.Fatalf("trying slot A the firmware booted partition %d", part)
	}
	b.Expect("Kernel panic", 5*time.Minute)
	b.PowerOff()
	if part := b.PowerOn(); part != contract.RPiPartNumber(2, contract.PartBootB) {
		t.Fatalf("after the failed test boot the firmware booted partition %d", part)
	}
	b.Expect("NVBOOT-MARK slot-committed b", 5*time.Minute)
	if a, _ := b.Autoboot(); a != (tryboot.Autoboot{Boot: 3, TryBoot: 2, AB: true}) {
		t.Errorf("autoboot.txt after the failed test boot: %+v", a)
	}
}

// TestRPiDeployInQEMU boots a Slots 2 Pi card in QEMU's raspi3b, the test
// playing the Pi firmware QEMU does not run (internal/testutil/raspi: it
// reads autoboot.txt, and takes the kernel, device tree and cmdline.txt
// from the boot partition it names). The card's own kernel (gokrazy's
// kernel.rpi), device tree and root (root-a by PARTUUID, a logical
// partition) bring up nvinit, which mounts the state from the card's data
// partition without DAX and starts kv from the card, ready. Then it
// deploys another kv (a small stand-in that listens on kv's port): the
// card has no text store, so the whole static program goes into the state
// on the card's data partition (contract.ELFDeployDir), and is kept once
// ready; after a power cycle the deployed program runs again, from its
// link on the card. (TestRPiTestBootInQEMU has the slots' test boots.)
func TestRPiDeployInQEMU(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-aarch64"); err != nil {
		t.Skip("qemu-system-aarch64 not installed (qemu-system-arm)")
	}
	c := rpiConfig(t, 2)
	c.Update = &config.Update{HTTPPassword: "test"}
	c.Interfaces = []config.Interface{{Name: raspi.NetInterface, Address: raspi.NetAddress, Gateway: raspi.NetGateway}}
	dir, im := buildRPi(t, c)
	// The stand-in kv: raspi3b's USB network is too slow (tens of KiB/s
	// on a loaded host) for kv's 6 MB in the endpoint's stall bound.
	small, err := filepath.Abs("testdata/deploy/kv")
	if err != nil {
		t.Fatal(err)
	}
	dc := *c
	dc.Packages = []string{small}
	dc.PackageConfig = map[string]config.PackageConfig{small: c.PackageConfig["github.com/nvboot/nvboot/examples/kv"]}
	v2, err := BuildServiceELF(context.Background(), Options{Config: &dc, Target: config.TargetRPi, ModuleRoot: moduleRoot(t), Logf: t.Logf}, "kv")
	if err != nil {
		t.Fatal(err)
	}
	b := raspi.New(t, filepath.Join(dir, im.Disk))
	cl := &deploy.Client{URL: fmt.Sprintf("http://127.0.0.1:%d", b.Forward(contract.DefaultUpdatePort)), Password: "test"}
	if part := b.PowerOn(); part != contract.RPiPartNumber(2, contract.PartBootA) {
		t.Fatalf("the firmware booted partition %d", part)
	}
	b.Expect("NVBOOT-MARK init", 5*time.Minute)
	b.Expect("NVBOOT-MARK slot-committed a", time.Minute)
	b.Expect("NVBOOT-MARK service-ready kv", 8*time.Minute)
	r := rpiProbe(t, b)
	if m := r.Mounts[contract.StateDir]; !strings.HasPrefix(m, "/dev/mmcblk0p7 ext4 rw") || strings.Contains(m, "dax") || r.Error != "" {
		t.Errorf("the state: %q (probe error %q), want the card's data partition, ext4, no DAX", m, r.Error)
	}
	if len(r.ServiceText) == 0 || r.ServiceText[0] != "/bin/kv" {
		t.Errorf("kv runs from %v, want /bin/kv on the card", r.ServiceText)
	}
	ctx := context.Background()
	f, err := cl.Features(ctx)
	if err != nil || f.Arch != "arm64" || !slices.Contains(f.Features, contract.FeatureDeployELF) {
		t.Fatalf("features: %+v, %v; want arm64, deploy-elf", f, err)
	}
	res, err := cl.Deploy(ctx, deploy.Program{Service: "kv", ELF: v2, Deadline: 5 * time.Minute})
	if err != nil || res.Result != contract.DeployKept || !strings.HasPrefix(res.Program, contract.ELFDeployDir+"/programs/") {
		t.Fatalf("deploy: %+v, %v", res, err)
	}
	t.Logf("kept %s (%d bytes): ready %v, down %v", res.Program, len(v2), res.Ready, res.Downtime)
	b.PowerOff()
	b.PowerOn()
	b.Expect("NVBOOT-MARK service-ready kv", 8*time.Minute)
	if r := rpiProbe(t, b); len(r.ServiceText) == 0 || r.ServiceText[0] != res.Program {
		t.Errorf("after a power cycle kv runs from %v, want the deployed %s", r.ServiceText, res.Program)
	}
}

// rpiProbe reads the next report of the image's probe from the console.
func rpiProbe(t *testing.T, b *raspi.Board) probeReport {
	t.Helper()
	line := b.Expect("NVBOOT-PROBE ", time.Minute)
	var r probeReport
	if err := json.Unmarshal([]byte(line[strings.Index(line, "NVBOOT-PROBE ")+len("NVBOOT-PROBE "):]), &r); err != nil {
		t.Fatal(err)
	}
	return r
}
