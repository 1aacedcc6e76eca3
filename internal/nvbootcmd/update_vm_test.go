package nvbootcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/image/appliance"
	"github.com/nvboot/nvboot/image/appliance/buildtest"
	"github.com/nvboot/nvboot/image/config"
	"github.com/nvboot/nvboot/image/guest"
	"github.com/nvboot/nvboot/internal/checkout"
	"github.com/nvboot/nvboot/vm"
	"github.com/nvboot/nvboot/vm/vmtest"
)

// OVMF split into code and a variable store, as a board's flash holds
// them: each test board gets its own copy of the store, which keeps the
// boot variables from boot to boot.
const (
	ovmfCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
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

// board is one UEFI board running a Slots 2 image: its own disk, pmem and
// variable store, the i6300esb watchdog. A reset ends QEMU (-no-reboot);
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
	for _, c := range [][2]string{{filepath.Join(imgDir, im.Disk), filepath.Join(b.dir, im.Disk)}, {ovmfVars, filepath.Join(b.dir, "vars.fd")}} {
		if out, err := exec.Command("cp", "--sparse=always", c[0], c[1]).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v %s", c[0], err, out)
		}
	}
	if err := appliance.CopyPmem(imgDir, im, b.dir); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *board) urls() (kv, up string) {
	return fmt.Sprintf("http://127.0.0.1:%d", b.kvPort), fmt.Sprintf("http://127.0.0.1:%d", b.upPort)
}

// boot powers the board on.
func (b *board) boot() *vm.Machine {
	b.t.Helper()
	vc, err := appliance.VMConfig(b.dir, b.im, appliance.BootOptions{PmemDir: b.dir, Firmware: "seabios", BootDisk: true,
		Forwards: []vm.Forward{{Host: b.kvPort, Guest: 8080}, {Host: b.upPort, Guest: guest.DefaultUpdatePort}}})
	if err != nil {
		b.t.Fatal(err)
	}
	// No -bios: the firmware is the pflash pair.
	vc.Extra = append(vc.Extra,
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+ovmfCode,
		"-drive", "if=pflash,format=raw,unit=1,file="+filepath.Join(b.dir, "vars.fd"),
		"-device", "i6300esb")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	b.t.Cleanup(cancel)
	m, err := vm.Start(ctx, vc)
	if err != nil {
		b.t.Fatal(err)
	}
	b.boots++
	b.t.Cleanup(func() {
		m.Kill()
		if b.t.Failed() {
			b.t.Logf("boot %d's console:\n%s", b.boots, m.Console())
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

type updateRun struct {
	rep    updateReport
	stderr string
	err    error
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
// whose readiness never comes, and one whose kernel cannot mount its root
// and panics, bring the board back on the old slot by themselves, and
// nvboot update says so. A wrong password is refused before anything.
func TestUpdateOnUEFIBoard(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	buildtest.NeedTools(t, "fsck.erofs")
	k := vmtest.Kernel(t)
	for _, f := range []string{ovmfCode, ovmfVars} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("no split OVMF for QEMU: %v (Debian package ovmf)", err)
		}
	}
	root, err := checkout.Root(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	cfgDir := t.TempDir()
	v1 := slotConfig(t, cfgDir, "v1", nil)
	v1Dir, v1Im := buildSlotImage(t, v1, root, k)

	// boot1 boots a fresh board on v1: the firmware finds no entry of
	// ours and runs BOOTX64.EFI, slot A, which nvinit commits.
	boot1 := func(t *testing.T) (*board, *vm.Machine) {
		b := newBoard(t, v1Dir, v1Im)
		b.t = t
		m := b.boot()
		b.expect(m, "NVBOOT-MARK slot-committed a")
		b.expect(m, "NVBOOT-MARK service-ready kv")
		return b, m
	}

	t.Run("committed", func(t *testing.T) {
		v2 := slotConfig(t, cfgDir, "v2", func(c *config.Config, pc *config.PackageConfig) {
			pc.GoBuildFlags = []string{"-ldflags=-s -w -buildid= -X=main.version=2"}
		})
		v2Dir, v2Im := buildSlotImage(t, v2, root, k)
		b, m := boot1(t)
		kvURL, up := b.urls()
		bad := slotConfig(t, t.TempDir(), "bad", func(c *config.Config, _ *config.PackageConfig) { c.Update.HTTPPassword = "wrong" })
		if _, _, err := execute("update", "-config", bad, v2Dir, up); err == nil || !strings.Contains(err.Error(), "refused the password") {
			t.Errorf("wrong password: %v", err)
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
		// A power cut: the board boots slot B again, committed.
		m.Kill()
		m = b.boot()
		b.expect(m, "NVBOOT-MARK slot-committed b")
		b.expect(m, "NVBOOT-MARK service-ready kv")
		if _, _, ver := kvGet(t, kvURL, "/healthz"); ver != "2" {
			t.Errorf("kv after a power cut: version %q; want 2", ver)
		}
	})

	t.Run("never-ready", func(t *testing.T) {
		never := slotConfig(t, cfgDir, "never", func(c *config.Config, pc *config.PackageConfig) {
			c.TestBootDeadline = "45s"
			pc.WaitFor = config.WaitFor{"tcp:8081"} // nothing listens there
		})
		neverDir, _ := buildSlotImage(t, never, root, k)
		b, m := boot1(t)
		kvURL, _ := b.urls()
		run := b.startUpdate(never, neverDir)
		b.reset(m)
		m = b.boot()
		b.expect(m, "NVBOOT-MARK slot-trial b")
		b.expect(m, "slot b: not every service was ready within 45s; rebooting into the committed slot")
		b.reset(m)
		m = b.boot()
		b.expect(m, "NVBOOT-MARK slot-committed a")
		b.expect(m, "NVBOOT-MARK service-ready kv")
		r := <-run
		if !errors.Is(r.err, ErrUpdateRolledBack) || r.rep.Result != UpdateRolledBack {
			t.Fatalf("update: %v, %+v; want rolled back\n%s", r.err, r.rep, r.stderr)
		}
		if code, _, ver := kvGet(t, kvURL, "/healthz"); code != 200 || ver != "dev" {
			t.Errorf("kv after the rollback: %d, version %q; want the old one, dev", code, ver)
		}
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
		m = b.boot()
		b.expect(m, "NVBOOT-MARK slot-committed a")
		b.expect(m, "NVBOOT-MARK service-ready kv")
		r := <-run
		if !errors.Is(r.err, ErrUpdateRolledBack) {
			t.Fatalf("update: %v, %+v; want rolled back\n%s", r.err, r.rep, r.stderr)
		}
	})
}
