package appliance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// TestApplianceGokrazyPrograms builds testdata/gokrazy/config.json, a
// gokrazy instance config as gokrazy writes one (GOARCH, an update
// password, SerialConsole disabled), and boots it twice:
//
//   - github.com/gokrazy/breakglass, from the module proxy at the version
//     builddir/github.com/gokrazy/breakglass/go.mod pins (gokrazy's way of
//     pinning), with its authorized keys from ExtraFilePaths: it calls
//     gokrazy.DontStartOnBoot, so it is stopped at boot, as on gokrazy;
//     started from the console, it loads the keys, makes its host key in
//     /perm and listens on the appliance's address.
//   - ./perm, a program importing github.com/gokrazy/gokrazy: it waits
//     with gokrazy.WaitForClock (and the config's WaitFor net-route),
//     counts boots in /perm (its HOME and working directory are there:
//     getcwd names it through the link, /nv/state) and exits 0, which
//     stops it; the second boot counts 2: /perm is the state filesystem.
//     It reads a file from a second disk (an ext4 image, /dev/vdb), which
//     nvinit mounted read-only on /mnt/data as MountDevices says.
func TestApplianceGokrazyPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	buildtest.NeedTools(t)
	k := vmtest.Kernel(t)
	cfgPath, err := filepath.Abs("testdata/gokrazy/config.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg, warnings, err := config.LoadWarn(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("warnings: %q", warnings)
	dir := filepath.Join(t.TempDir(), "img")
	im, err := Build(context.Background(), Options{Config: cfg, Layout: OFF2F, Out: dir, Kernel: k,
		ModuleRoot: moduleRoot(t), ConfigDir: filepath.Dir(cfgPath), Logf: t.Logf})
	if err != nil {
		t.Fatalf("building the gokrazy config (breakglass comes from the module proxy): %v", err)
	}
	pm := t.TempDir()
	if err := CopyPmem(dir, im, pm); err != nil {
		t.Fatal(err)
	}
	// The disk MountDevices names: an ext4 image holding hello.txt.
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "hello.txt"), []byte("from vdb\n"), 0o644)
	data := filepath.Join(t.TempDir(), "data.ext4")
	if out, err := exec.Command("mke2fs", "-q", "-t", "ext4", "-d", src, data, "8M").CombinedOutput(); err != nil {
		t.Fatalf("mke2fs: %v\n%s", err, out)
	}
	b := startWith(t, dir, im, BootOptions{PmemDir: pm, Disks: []vm.Disk{{Path: data}}})
	line := b.expect(t, "GOKRAZY-PERM ")
	for _, want := range []string{"boot=1 ", "home=/perm/home/perm ", "wd=/nv/state/home/perm ", "first=1 ", `mnt="from vdb"`} {
		if !strings.Contains(line, want) {
			t.Errorf("perm printed %q, want %q in it", line, want)
		}
	}
	if strings.Contains(line, "year=1970") {
		t.Errorf("WaitForClock let it start with the clock at the epoch: %q", line)
	}
	b.expect(t, "perm exited with status 0")
	b.expect(t, "breakglass asked not to be started at boot (gokrazy.DontStartOnBoot): stopped")
	if _, err := b.stdin.Write([]byte("start breakglass\n")); err != nil {
		t.Fatal(err)
	}
	b.expect(t, "host key not found, creating initial host key")
	b.expect(t, "listening on 10.0.2.15:22")
	b.expect(t, "host key fingerprint: SHA256:")
	b.poweroff(t)
	if strings.Contains(b.m.Console(), "perm: restarting") {
		t.Error("perm exited 0 and was restarted: gokrazy's init leaves it stopped")
	}

	b = startWith(t, dir, im, BootOptions{PmemDir: pm, Disks: []vm.Disk{{Path: data}}})
	if line := b.expect(t, "GOKRAZY-PERM "); !strings.Contains(line, "boot=2 ") {
		t.Errorf("second boot: %q, want boot=2 (the count kept in /perm)", line)
	}
	b.poweroff(t)
}
