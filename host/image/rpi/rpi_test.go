package rpi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/tryboot"
	"github.com/nvboot/nvboot/host/image/config"
)

// fakeParts are packages shaped as gokrazy's, with a few bytes each.
func fakeParts(t *testing.T) *Parts {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"kernel/vmlinuz": "kernel", "kernel/bcm2710-rpi-3-b.dtb": "dtb3", "kernel/bcm2711-rpi-4-b.dtb": "dtb4",
		"kernel/overlays/disable-bt.dtbo": "o", "kernel/overlays/overlay_map.dtb": "m", "kernel/overlays/README": "r",
		"kernel/config.txt":  "# Switch the CPU into 64-bit mode\narm_control=0x200\n\nenable_uart=0\n\nkernel=vmlinuz\n",
		"kernel/cmdline.txt": "root=/dev/mmcblk0p2 init=/gokrazy/init\n", "kernel/go.mod": "module k\n",
		"firmware/bootcode.bin": "bc", "firmware/start.elf": "s", "firmware/start4.elf": "s4", "firmware/fixup.dat": "f",
		"firmware/LICENSE.broadcom":      "l",
		"eeprom/pieeprom-2025-01-02.bin": "old", "eeprom/pieeprom-2026-05-17.bin": "new", "eeprom/vl805-000137ad.bin": "v1",
		"eeprom/vl805-000138c0.bin": "v2", "eeprom/recovery.bin": "rec",
	}
	for name, text := range files {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := func(n string) *Module {
		return &Module{Package: "example.com/" + n, Path: "example.com/" + n, Dir: filepath.Join(root, n)}
	}
	return &Parts{Kernel: m("kernel"), Firmware: m("firmware"), EEPROM: m("eeprom")}
}

// list is the files under dir, relative, slash-separated, sorted.
func list(t *testing.T, dir string) []string {
	t.Helper()
	var l []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			l = append(l, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(l)
	return l
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTreesOneSlot(t *testing.T) {
	p := fakeParts(t)
	c := &config.Config{}
	trees, err := p.Trees(t.TempDir(), c, 1)
	if err != nil {
		t.Fatal(err)
	}
	boot := trees[contract.PartBoot]
	want := []string{"bcm2710-rpi-3-b.dtb", "bcm2711-rpi-4-b.dtb", "bootcode.bin", "cmdline.txt", "config.txt", "fixup.dat",
		"overlays/disable-bt.dtbo", "overlays/overlay_map.dtb", "pieeprom.sig", "pieeprom.upd", "recovery.bin",
		"start.elf", "start4.elf", "vl805.bin", "vl805.sig", "vmlinuz"}
	if got := list(t, boot); !slices.Equal(got, want) || len(trees) != 1 {
		t.Fatalf("boot partition:\n%q\nwant\n%q", got, want)
	}
	if got := read(t, filepath.Join(boot, "cmdline.txt")); got != "console=tty1 console=serial0,115200 root=PARTUUID=6e76626f-02 rootfstype=ext4 rootwait ro init=/sbin/nvinit panic=10 oops=panic quiet\n" {
		t.Errorf("cmdline.txt %q", got)
	}
	// The newest bootloader and VL805 firmware, signed.
	if read(t, filepath.Join(boot, "pieeprom.upd")) != "new" || read(t, filepath.Join(boot, "vl805.bin")) != "v2" {
		t.Error("not the newest EEPROM files")
	}
	// 2026-05-17 00:00 UTC.
	if got, want := read(t, filepath.Join(boot, "pieeprom.sig")), fmt.Sprintf("%x\nts: 1778976000\n", sha256.Sum256([]byte("new"))); got != want {
		t.Errorf("pieeprom.sig %q, want %q", got, want)
	}
}

func TestTreesTwoSlots(t *testing.T) {
	p := fakeParts(t)
	c := &config.Config{Gokrazy: config.Gokrazy{KernelExtraArgs: []string{"foo=1"}}, KernelCmdline: "bar"}
	trees, err := p.Trees(t.TempDir(), c, 2)
	if err != nil {
		t.Fatal(err)
	}
	cfg := trees[contract.PartConfig]
	if got, want := list(t, cfg), []string{"autoboot.txt", "bootcode.bin", "config.txt", "pieeprom.sig", "pieeprom.upd", "recovery.bin", "vl805.bin", "vl805.sig"}; !slices.Equal(got, want) {
		t.Errorf("config partition %q, want %q", got, want)
	}
	a, err := tryboot.Parse([]byte(read(t, filepath.Join(cfg, tryboot.Name))))
	if err != nil || a != (tryboot.Autoboot{Boot: 2, TryBoot: 3, AB: true}) {
		t.Errorf("autoboot.txt: %+v, %v; want slot A's boot partition 2, trying 3", a, err)
	}
	for slot, n := range map[string]string{"a": "05", "b": "06"} {
		dir := trees[contract.BootPart(slot)]
		l := list(t, dir)
		if slices.Contains(l, "bootcode.bin") || slices.Contains(l, "pieeprom.upd") || !slices.Contains(l, "start4.elf") || !slices.Contains(l, "vmlinuz") {
			t.Errorf("slot %s's boot partition %q: firmware and kernel, no bootcode.bin or EEPROM files", slot, l)
		}
		want := "console=tty1 console=serial0,115200 root=PARTUUID=6e76626f-" + n + " rootfstype=ext4 rootwait ro init=/sbin/nvinit panic=10 oops=panic nvboot.slot=" + slot + " quiet bar foo=1\n"
		if got := read(t, filepath.Join(dir, "cmdline.txt")); got != want {
			t.Errorf("slot %s cmdline.txt\n%q\nwant\n%q", slot, got, want)
		}
		if s, ok, err := contract.ParseSlot(read(t, filepath.Join(dir, "cmdline.txt"))); s != slot || !ok || err != nil {
			t.Errorf("slot %s's command line names slot %q (%v, %v)", slot, s, ok, err)
		}
	}
}

func TestConfigTxt(t *testing.T) {
	kernel := []byte("# Switch the CPU into 64-bit mode\narm_control=0x200\n\nenable_uart=0\n\nkernel=vmlinuz\n")
	for _, c := range []struct {
		serial string
		extra  []string
		want   string
	}{
		{"", nil, "enable_uart=1\n# From the kernel package's config.txt:\n# Switch the CPU into 64-bit mode\narm_control=0x200\n"},
		{"off", []string{"dtoverlay=disable-bt", "gpu_mem=16"}, "enable_uart=0\n# From the kernel package's config.txt:\n# Switch the CPU into 64-bit mode\narm_control=0x200\n# BootloaderExtraLines:\ndtoverlay=disable-bt\ngpu_mem=16\n"},
		{"disabled", nil, "enable_uart=1\n"},
	} {
		cfg := &config.Config{Gokrazy: config.Gokrazy{SerialConsole: c.serial, BootloaderExtraLines: c.extra}}
		got := string(ConfigTxt(cfg, kernel))
		head := "# Written by nvboot build: the Raspberry Pi firmware's settings.\narm_64bit=1\nkernel=vmlinuz\n"
		if !strings.HasPrefix(got, head) || !strings.Contains(got, c.want) || strings.Count(got, "enable_uart") != 1 || strings.Count(got, "kernel=") != 1 {
			t.Errorf("SerialConsole %q: config.txt\n%s\nwant it to start with arm_64bit=1 and hold\n%s", c.serial, got, c.want)
		}
	}
}

func TestSerialConsole(t *testing.T) {
	for sc, want := range map[string]Console{
		"":               {true, "console=serial0,115200"},
		"serial0,115200": {true, "console=serial0,115200"},
		"UART0":          {true, "console=serial0,115200"},
		"ttyAMA0,9600":   {true, "console=ttyAMA0,9600"},
		"disabled":       {true, ""},
		"off":            {false, ""},
	} {
		c := &config.Config{Gokrazy: config.Gokrazy{SerialConsole: sc}}
		if got := SerialConsole(c); got != want {
			t.Errorf("SerialConsole %q: %+v, want %+v", sc, got, want)
		}
	}
	c := &config.Config{Gokrazy: config.Gokrazy{SerialConsole: "off"}}
	if got := Cmdline(c, "6e76626f-02"); strings.Contains(got, "serial") || !strings.HasPrefix(got, "console=tty1 root=") {
		t.Errorf("SerialConsole off: %q", got)
	}
}

func TestTreesRefuse(t *testing.T) {
	p := fakeParts(t)
	os.Remove(filepath.Join(p.Kernel.Dir, "vmlinuz"))
	if _, err := p.Trees(t.TempDir(), &config.Config{}, 1); err == nil || !strings.Contains(err.Error(), "no vmlinuz") {
		t.Errorf("a kernel package without vmlinuz: %v", err)
	}
	p = fakeParts(t)
	os.WriteFile(filepath.Join(p.Firmware.Dir, "fixup.dat"), nil, 0o644)
	os.WriteFile(filepath.Join(p.Kernel.Dir, "bootcode.bin"), nil, 0o644) // not a kernel glob: fine
	os.MkdirAll(filepath.Join(p.Firmware.Dir, "overlays"), 0o755)
	os.WriteFile(filepath.Join(p.Firmware.Dir, "overlays", "disable-bt.dtbo"), nil, 0o644)
	if _, err := p.Trees(t.TempDir(), &config.Config{}, 1); err == nil || !strings.Contains(err.Error(), "disable-bt.dtbo: two packages give this file") {
		t.Errorf("an overlay in both packages: %v", err)
	}
	p = fakeParts(t)
	for _, f := range []string{"pieeprom-2025-01-02.bin", "pieeprom-2026-05-17.bin"} {
		os.Remove(filepath.Join(p.EEPROM.Dir, f))
	}
	if _, err := p.Trees(t.TempDir(), &config.Config{}, 1); err == nil || !strings.Contains(err.Error(), "no pieeprom-*.bin") {
		t.Errorf("an EEPROM package without a bootloader: %v", err)
	}
	// No firmware or EEPROM package ("" turns each off): the kernel only.
	p = fakeParts(t)
	p.Firmware, p.EEPROM = nil, nil
	trees, err := p.Trees(t.TempDir(), &config.Config{}, 1)
	if err != nil || slices.Contains(list(t, trees[contract.PartBoot]), "start.elf") || slices.Contains(list(t, trees[contract.PartBoot]), "recovery.bin") {
		t.Errorf("without firmware and EEPROM: %v", err)
	}
}

func TestLayout(t *testing.T) {
	two := Layout(2)
	var got []string
	for _, p := range two {
		got = append(got, fmt.Sprintf("%s:%d:%#02x:%v:%v", p.Name, p.Number, p.Type, p.FAT, p.Logical))
	}
	want := []string{"config:1:0x0c:true:false", "boot-a:2:0x0c:true:false", "boot-b:3:0x0c:true:false",
		"root-a:5:0x83:false:true", "root-b:6:0x83:false:true", "data:7:0x83:false:true"}
	if !slices.Equal(got, want) {
		t.Errorf("Layout(2) %q, want %q", got, want)
	}
	if one := Layout(1); len(one) != 3 || !one[0].FAT || one[1].FAT || one[2].Logical {
		t.Errorf("Layout(1) %+v", one)
	}
	if RootPARTUUID(2, "b") != "6e76626f-06" || RootPARTUUID(1, "") != "6e76626f-02" {
		t.Error("root PARTUUIDs")
	}
	if FATBytes(contract.PartConfig, 3<<20) != ConfigBytes || FATBytes(contract.PartBootA, 1<<20) != MinBootBytes || FATBytes(contract.PartBootA, 80<<20) != 168<<20 {
		t.Errorf("FATBytes: %d %d", FATBytes(contract.PartBootA, 1<<20), FATBytes(contract.PartBootA, 80<<20))
	}
}

// TestPinned: the instance's builddir go.mod pins a package's module (a
// local replace used as it is), else nvboot's default; neither is an error.
func TestPinned(t *testing.T) {
	dir := t.TempDir()
	bd := filepath.Join(dir, "builddir", "github.com", "gokrazy", "kernel.rpi")
	os.MkdirAll(bd, 0o755)
	os.WriteFile(filepath.Join(bd, "go.mod"), []byte("module gokrazy/build/kernel\n\nrequire github.com/gokrazy/kernel.rpi v0.0.0-20240101000000-abcdefabcdef\n"), 0o644)
	own := filepath.Join(dir, "builddir", "example.com", "mykernel")
	os.MkdirAll(filepath.Join(own, "src"), 0o755)
	os.WriteFile(filepath.Join(own, "go.mod"), []byte("module gokrazy/build/mine\n\nrequire example.com/mykernel v0.0.0\n\nreplace example.com/mykernel => ./src\n"), 0o644)
	ctx := context.Background()
	m, err := pinned(ctx, config.DefaultKernelPackage, dir)
	if err != nil || m.Version != "v0.0.0-20240101000000-abcdefabcdef" || m.Path != config.DefaultKernelPackage || m.Pinned != filepath.Join(bd, "go.mod") {
		t.Errorf("pinned by the instance: %+v, %v", m, err)
	}
	m, err = pinned(ctx, "example.com/mykernel", dir)
	if err != nil || m.Dir != filepath.Join(own, "src") || m.Version != "" {
		t.Errorf("replaced by a directory: %+v, %v", m, err)
	}
	m, err = pinned(ctx, config.DefaultFirmwarePackage, dir)
	if err != nil || m.Version != DefaultVersions[config.DefaultFirmwarePackage] || m.Pinned != "nvboot's default" {
		t.Errorf("the default: %+v, %v", m, err)
	}
	if _, err := pinned(ctx, "example.com/other", dir); err == nil || !strings.Contains(err.Error(), "builddir/example.com/other/go.mod") {
		t.Errorf("an unpinned package: %v", err)
	}
	c := &config.Config{Gokrazy: config.Gokrazy{KernelPackage: new(string)}}
	if _, err := Fetch(ctx, c, dir, nil); err == nil || !strings.Contains(err.Error(), `KernelPackage ""`) {
		t.Errorf("KernelPackage \"\": %v", err)
	}
}
