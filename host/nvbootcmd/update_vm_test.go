package nvbootcmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/checkout"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// slotConfig writes a Slots 2 image config for kv with the update endpoint
// on (password "test"); change adjusts it.
func slotConfig(t *testing.T, dir, name string, change func(c *config.Config, pc *config.PackageConfig)) string {
	t.Helper()
	c := config.Demo()
	pc := c.PackageConfig[kvPackage]
	c.Update = &config.Update{HTTPPassword: "test"}
	c.Slots, c.TestBootDeadline = 2, "90s"
	if change != nil {
		change(c, &pc)
	}
	c.PackageConfig[kvPackage] = pc
	p := filepath.Join(dir, name+".json")
	if err := c.Write(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func buildSlotImage(t *testing.T, cfgPath, root, kernel string) (string, *appliance.Image) {
	t.Helper()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "img")
	im, err := appliance.Build(context.Background(), appliance.Options{Config: cfg, Layout: appliance.OFF2F, Out: dir,
		Kernel: kernel, ModuleRoot: root, ConfigDir: filepath.Dir(cfgPath)})
	if err != nil {
		t.Fatal(err)
	}
	return dir, im
}

// slotImages is what the update tests start from: the v1 (kv "dev") and
// v2 (kv "2") Slots 2 images, built in the checkout root with kernel, their
// configs in cfgDir.
type slotImages struct {
	kernel, root, cfgDir string
	v1, v2               string // the configs
	v1Dir, v2Dir         string
	v1Im, v2Im           *appliance.Image
}

// newSlotImages skips the test where a UEFI board cannot run (-short, no
// QEMU or kernel, no split OVMF, missing tools) and builds the two images.
func newSlotImages(t *testing.T) *slotImages {
	t.Helper()
	return newSlotImagesFor(t, vm.ArchX86_64)
}

// newSlotImagesFor is newSlotImages for arch's board: the arm64 images
// are built with GOARCH=arm64 in their configs (target arm64-virt) for
// the virt board and its UEFI firmware, AAVMF.
func newSlotImagesFor(t *testing.T, arch string) *slotImages {
	t.Helper()
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	buildtest.NeedTools(t, "fsck.erofs")
	s := &slotImages{cfgDir: t.TempDir()}
	goarch := func(*config.Config) {}
	if arch == vm.ArchArm64 {
		s.kernel = vmtest.KernelArm64(t, "qemu-system-aarch64")
		goarch = func(c *config.Config) { c.Environment = []string{"GOARCH=arm64"} }
	} else {
		s.kernel = vmtest.Kernel(t)
	}
	if err := vm.UEFIOf(arch).Installed(); err != nil {
		t.Skip(err)
	}
	var err error
	if s.root, err = checkout.Root(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	s.v1 = slotConfig(t, s.cfgDir, "v1", func(c *config.Config, _ *config.PackageConfig) { goarch(c) })
	s.v1Dir, s.v1Im = buildSlotImage(t, s.v1, s.root, s.kernel)
	s.v2 = slotConfig(t, s.cfgDir, "v2", func(c *config.Config, pc *config.PackageConfig) {
		goarch(c)
		pc.GoBuildFlags = []string{"-ldflags=-s -w -buildid= -X=main.version=2"}
	})
	s.v2Dir, s.v2Im = buildSlotImage(t, s.v2, s.root, s.kernel)
	return s
}

// board is one UEFI board running a Slots 2 image (uefiBoard, as nvboot
// run -firmware uefi boots one): its own disk, pmem and variable store,
// the i6300esb watchdog. A reset ends QEMU (-no-reboot);
// boot starts the board again from what its disk and variables hold, as
// the firmware does after a reset.
type board struct {
	t              *testing.T
	dir            string
	im             *appliance.Image
	kvPort, upPort int
	boots          int
}

func newBoard(t *testing.T, imgDir string, im *appliance.Image) *board {
	t.Helper()
	b := &board{t: t, dir: t.TempDir(), im: im, kvPort: freePort(t), upPort: freePort(t)}
	if out, err := exec.Command("cp", "--sparse=always", filepath.Join(imgDir, im.Disk), filepath.Join(b.dir, im.Disk)).CombinedOutput(); err != nil {
		t.Fatalf("cp %s: %v %s", im.Disk, err, out)
	}
	if err := appliance.CopyPmem(imgDir, im, b.dir); err != nil {
		t.Fatal(err)
	}
	return b
}

// vars is the board's UEFI variable store: its own, as each board's NVRAM.
func (b *board) vars() string { return filepath.Join(b.dir, "vars.fd") }

func (b *board) urls() (kv, up string) {
	return fmt.Sprintf("http://127.0.0.1:%d", b.kvPort), fmt.Sprintf("http://127.0.0.1:%d", b.upPort)
}

// boot powers the board on.
func (b *board) boot() *vm.Machine {
	b.t.Helper()
	vc, err := appliance.VMConfig(b.dir, b.im, appliance.BootOptions{PmemDir: b.dir, BootDisk: true,
		Forwards: []vm.Forward{{Host: b.kvPort, Guest: 8080}, {Host: b.upPort, Guest: contract.DefaultUpdatePort}}})
	if err != nil {
		b.t.Fatal(err)
	}
	// The board's NVRAM: blank at its first power-on, then kept.
	if _, err := vm.NewFirmwareVars(vc.Arch, b.vars()); err != nil {
		b.t.Fatal(err)
	}
	// A reset ends QEMU (no vm.Config.Reboot): the test sees each boot end
	// and powers the board on again.
	uefiBoard(&vc, b.vars())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	b.t.Cleanup(cancel)
	m, err := vm.Start(ctx, vc)
	if err != nil {
		b.t.Fatal(err)
	}
	b.boots++
	n := b.boots
	b.t.Cleanup(func() {
		m.Kill()
		if b.t.Failed() || testing.Verbose() {
			b.t.Logf("boot %d's console:\n%s", n, m.Console())
		}
	})
	return m
}

// expect waits for s on m's console.
func (b *board) expect(m *vm.Machine, s string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if _, err := m.ExpectString(ctx, s); err != nil {
		b.t.Fatalf("boot %d: waiting for %q: %v\n%s", b.boots, s, err, m.ConsoleTail(40))
	}
}

// reset waits for the board to reset by itself (QEMU ends).
func (b *board) reset(m *vm.Machine) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	m.Wait(ctx)
	if ctx.Err() != nil {
		b.t.Fatalf("boot %d: no reset within 8 minutes\n%s", b.boots, m.ConsoleTail(40))
	}
}

// up powers the board on and waits for slot, committed, with kv ready and
// answering version: a whole image.
func (b *board) up(slot, version string) *vm.Machine {
	b.t.Helper()
	m := b.boot()
	b.expect(m, "NVBOOT-MARK slot-committed "+slot)
	b.expect(m, "NVBOOT-MARK service-ready kv")
	kv, _ := b.urls()
	if code, _, ver := kvGet(b.t, kv, "/healthz"); code != 200 || ver != version {
		b.t.Errorf("boot %d, slot %s: kv answers %d, version %q; want version %q", b.boots, slot, code, ver, version)
	}
	return m
}

// cut cuts the board's power.
func (b *board) cut(m *vm.Machine) {
	m.Kill()
	m.Wait(context.Background())
}

type updateRun struct {
	rep    updateReport
	stderr string
	err    error
}

// rolledBack fails unless the update run ended rolled back.
func rolledBack(t *testing.T, run <-chan updateRun) {
	t.Helper()
	r := <-run
	if !errors.Is(r.err, ErrUpdateRolledBack) || r.rep.Result != UpdateRolledBack {
		t.Fatalf("update: %v, %+v; want rolled back\n%s", r.err, r.rep, r.stderr)
	}
}

// startUpdate runs nvboot update of the image in dir onto the board.
func (b *board) startUpdate(cfg, dir string) <-chan updateRun {
	ch := make(chan updateRun, 1)
	_, up := b.urls()
	go func() {
		var r updateRun
		var stdout string
		stdout, r.stderr, r.err = execute("update", "-json", "-config", cfg, dir, up)
		json.Unmarshal([]byte(stdout), &r.rep)
		ch <- r
	}()
	return ch
}

// TestUpdateOnUEFIBoard updates a Slots 2 appliance booted by UEFI
// firmware (OVMF, its own variable store, the i6300esb watchdog): a new
// kv that becomes ready is committed and stays after a power cut; one
// whose readiness never comes, one that wedges the CPU (the watchdog's
// case), and one whose kernel cannot mount its root and panics, bring the
// board back on the old slot by themselves, and nvboot update says so;
// power cuts during the root's write, between
// BootNext and the reboot, and during a test boot each leave a board that
// boots the old image or the new one whole. A wrong password is refused
// before anything.
func TestUpdateOnUEFIBoard(t *testing.T) {
	s := newSlotImages(t)
	k, root, cfgDir := s.kernel, s.root, s.cfgDir
	v1Dir, v1Im := s.v1Dir, s.v1Im
	v2, v2Dir, v2Im := s.v2, s.v2Dir, s.v2Im

	// boot1 boots a fresh board on v1: the firmware finds no entry of
	// ours and runs BOOTX64.EFI, slot A, which nvinit commits.
	boot1 := func(t *testing.T) (*board, *vm.Machine) {
		b := newBoard(t, v1Dir, v1Im)
		m := b.up("a", "dev")
		b.expect(m, "slot a: watchdog armed")
		return b, m
	}

	never := slotConfig(t, cfgDir, "never", func(c *config.Config, pc *config.PackageConfig) {
		c.TestBootDeadline = "45s"
		pc.WaitFor = config.WaitFor{"tcp:8081"} // nothing listens there
	})
	neverDir, neverIm := buildSlotImage(t, never, root, k)

	t.Run("committed", func(t *testing.T) {
		b, m := boot1(t)
		kvURL, up := b.urls()
		bad := slotConfig(t, t.TempDir(), "bad", func(c *config.Config, _ *config.PackageConfig) { c.Update.HTTPPassword = "wrong" })
		if _, _, err := execute("update", "-config", bad, v2Dir, up); err == nil || !strings.Contains(err.Error(), "refused the password") {
			t.Errorf("wrong password: %v", err)
		}
		// No password, a damaged upload, another architecture: refused
		// by the appliance, and the update below still finds slot A
		// committed and nothing switched.
		if _, err := (&deploy.Client{URL: up}).WritePartition(context.Background(), contract.PathRoot, deploy.Partition{}); !errors.Is(err, deploy.ErrUnauthorized) {
			t.Errorf("no password: %v", err)
		}
		cl := &deploy.Client{URL: up, Password: "test"}
		disk, err := os.Open(filepath.Join(v2Dir, v2Im.Disk))
		if err != nil {
			t.Fatal(err)
		}
		defer disk.Close()
		rootA := v2Im.Part(contract.PartRootA)
		for _, tc := range []struct {
			name, arch, sum, want string
		}{
			{"damaged", v2Im.Arch, strings.Repeat("0", 64), "upload hash mismatch"},
			{"another architecture", "arm64", strings.Repeat("0", 64), `the image is built for "arm64"`},
		} {
			_, err := cl.WritePartition(context.Background(), contract.PathRoot, deploy.Partition{R: io.NewSectionReader(disk, rootA.Offset, v2Im.RootBytes), Size: v2Im.RootBytes, SHA256: tc.sum, Arch: tc.arch})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s root: %v, want an error naming %q", tc.name, err, tc.want)
			}
		}
		if _, err := cl.TestBoot(context.Background(), strings.Repeat("0", 64), strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "not written and read back") {
			t.Errorf("a test boot after refused uploads: %v", err)
		}
		run := b.startUpdate(v2, v2Dir)
		b.reset(m) // the update's reboot
		m = b.boot()
		b.expect(m, "NVBOOT-MARK slot-trial b")
		b.expect(m, "slot b: every service is ready: committed")
		r := <-run
		if r.err != nil || r.rep.Result != UpdateCommitted || r.rep.To != (SlotImage{"b", v2Im.ID}) || r.rep.From != (SlotImage{"a", v1Im.ID}) {
			t.Fatalf("update: %v, %+v\n%s", r.err, r.rep, r.stderr)
		}
		if code, _, ver := kvGet(t, kvURL, "/healthz"); code != 200 || ver != "2" {
			t.Errorf("kv after the update: %d, version %q; want 2", code, ver)
		}
		// The figures BENCHMARKS.md quotes (the elapsed time includes
		// the test's power-on of QEMU after the reset).
		t.Logf("update: %s in %v, %d bytes sent (QEMU %s)", r.rep.Result, r.rep.Elapsed.Round(time.Millisecond), r.rep.BytesSent, m.Accel)
		// A power cut: the board boots slot B again, committed.
		b.cut(m)
		b.up("b", "2")
	})

	t.Run("never-ready", func(t *testing.T) {
		b, m := boot1(t)
		run := b.startUpdate(never, neverDir)
		b.reset(m)
		m = b.boot()
		b.expect(m, "NVBOOT-MARK slot-trial b")
		b.expect(m, "slot b: not every service was ready within 45s; rebooting into the committed slot")
		b.reset(m)
		b.up("a", "dev")
		rolledBack(t, run)
	})

	// Power cuts during an update: each boot after runs the old image or
	// the new one, whole, never a mix or nothing.
	t.Run("power-cuts", func(t *testing.T) {
		ctx := context.Background()
		// During the root's write: the old slot, committed; the
		// half-written slot is never booted.
		b, m := boot1(t)
		kvURL, up := b.urls()
		cl := &deploy.Client{URL: up, Password: "test"}
		_, err := sendSlot(ctx, cl, v2Dir, v2Im, "b", func(sent, total int64) {
			if sent >= total/2 {
				m.Kill()
			}
		})
		if err == nil {
			t.Fatal("the root's write went through a power cut")
		}
		b.cut(m)
		m = b.up("a", "dev")
		// After BootNext, before the reboot: the next boot is the test
		// boot, which commits the new image.
		sums, err := sendSlot(ctx, cl, v2Dir, v2Im, "b", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.TestBoot(ctx, sums[0], sums[1]); err != nil {
			t.Fatal(err)
		}
		b.cut(m)
		m = b.boot()
		b.expect(m, "NVBOOT-MARK slot-trial b")
		b.expect(m, "slot b: every service is ready: committed")
		if _, _, ver := kvGet(t, kvURL, "/healthz"); ver != "2" {
			t.Errorf("after a cut between BootNext and the reboot: kv version %q, want the new one, 2", ver)
		}
		// During a test boot, before its commit (an image whose kv is
		// never ready, so the commit cannot come first): the committed
		// slot, b, again.
		sums, err = sendSlot(ctx, cl, neverDir, neverIm, "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.TestBoot(ctx, sums[0], sums[1]); err != nil {
			t.Fatal(err)
		}
		if err := cl.Reboot(ctx); err != nil {
			t.Fatal(err)
		}
		b.reset(m)
		m = b.boot()
		b.expect(m, "NVBOOT-MARK slot-trial a")
		b.cut(m)
		b.up("b", "2")
	})

	t.Run("hang", func(t *testing.T) {
		// hog wedges the board's one CPU once started; its readiness
		// never comes, and the deadline is far: only the watchdog can
		// reset the board.
		hog := filepath.Join(root, "host/nvbootcmd/testdata/update/hog")
		hangs := slotConfig(t, cfgDir, "hang", func(c *config.Config, _ *config.PackageConfig) {
			c.TestBootDeadline = "30m"
			c.Packages = append(c.Packages, hog)
			c.PackageConfig[hog] = config.PackageConfig{WaitFor: config.WaitFor{"tcp:9"}}
		})
		hangDir, _ := buildSlotImage(t, hangs, root, k)
		b, m := boot1(t)
		run := b.startUpdate(hangs, hangDir)
		b.reset(m)
		m = b.boot()
		b.expect(m, "NVBOOT-MARK slot-trial b")
		b.expect(m, "hog: spinning")
		b.reset(m) // the watchdog's
		if strings.Contains(m.Console(), "rebooting") {
			t.Fatalf("nvinit rebooted the hung board itself, not the watchdog")
		}
		b.up("a", "dev")
		rolledBack(t, run)
	})

	t.Run("kernel-panic", func(t *testing.T) {
		// The last root= wins: slot B's kernel finds no root and panics.
		panics := slotConfig(t, cfgDir, "panic", func(c *config.Config, _ *config.PackageConfig) { c.KernelCmdline = "root=/dev/vdz" })
		panicDir, _ := buildSlotImage(t, panics, root, k)
		b, m := boot1(t)
		run := b.startUpdate(panics, panicDir)
		b.reset(m)
		m = b.boot()
		b.expect(m, "Kernel panic")
		b.reset(m) // panic=10
		b.up("a", "dev")
		rolledBack(t, run)
	})
}

// sendSlot sends the image's root and the other slot's boot partition to
// the appliance as nvboot update does, cut(sent, total) seeing the root's
// progress; it returns the hashes for the test boot, or the first error.
func sendSlot(ctx context.Context, cl *deploy.Client, dir string, im *appliance.Image, target string, cut func(sent, total int64)) ([]string, error) {
	disk, err := os.Open(filepath.Join(dir, im.Disk))
	if err != nil {
		return nil, err
	}
	defer disk.Close()
	var sums []string
	for i, p := range []struct {
		path string
		part *appliance.Partition
		size int64
	}{{contract.PathRoot, im.Part(contract.PartRootA), im.RootBytes}, {contract.PathBoot, im.Part(contract.BootPart(target)), im.BootBytes}} {
		h := sha256.New()
		io.Copy(h, io.NewSectionReader(disk, p.part.Offset, p.size))
		sum := hex.EncodeToString(h.Sum(nil))
		cl.Progress = nil
		if i == 0 {
			cl.Progress = cut
		}
		if _, err := cl.WritePartition(ctx, p.path, deploy.Partition{R: io.NewSectionReader(disk, p.part.Offset, p.size), Size: p.size, SHA256: sum, Arch: im.Arch}); err != nil {
			return nil, err
		}
		sums = append(sums, sum)
	}
	return sums, nil
}
