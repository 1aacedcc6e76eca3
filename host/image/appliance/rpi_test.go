package appliance

import (
	"context"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/mbr"
	"github.com/nvboot/nvboot/format/tryboot"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// rpiConfig is the demo (kv on the state) with the probe service beside
// it, built for a Pi with slots (0 or 2).
func rpiConfig(t *testing.T, slots int) *config.Config {
	c := probeConfig(t)
	c.Slots = slots
	return c
}

// buildRPi builds c for a Raspberry Pi into a new directory.
func buildRPi(t *testing.T, c *config.Config) (string, *Image) {
	t.Helper()
	if testing.Short() {
		t.Skip("fetches the Pi's parts from the module proxy and builds arm64 programs and a card")
	}
	buildtest.NeedTools(t, "mkfs.vfat", "mcopy")
	out := filepath.Join(t.TempDir(), "pi")
	im, err := Build(context.Background(), Options{Config: c, Layout: ELF, Out: out, ModuleRoot: moduleRoot(t), Board: BoardRPi, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	return out, im
}

// mtools runs an mtools command on the FAT partition p of the card.
func mtools(t *testing.T, disk string, p Partition, cmd string, args ...string) []byte {
	t.Helper()
	c := exec.Command(cmd, append([]string{"-i", disk + "@@" + strconv.FormatInt(p.Offset, 10)}, args...)...)
	c.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%s %v: %v", cmd, args, err)
	}
	return out
}

// TestBuildRPi builds a Slots 2 card and reads it back with the field's
// tools: the MBR (sfdisk), the FAT partitions (mtools: autoboot.txt, each
// slot's config.txt and cmdline.txt naming its own root), the root (e2fsck,
// nvinit's config: the state on the card's data partition without DAX, the
// tryboot firmware), the programs (aarch64 ELF).
func TestBuildRPi(t *testing.T) {
	dir, im := buildRPi(t, rpiConfig(t, 2))
	disk := filepath.Join(dir, im.Disk)
	if im.Board() != BoardRPi || im.Target != config.TargetRPi || im.Kernel != "" || len(im.Pmem) != 0 || im.Arch != "arm64" || im.Slots != 2 || im.ID == "" {
		t.Errorf("image.json: %+v", im)
	}
	for _, f := range []string{"bzImage", "pmem-text.img", "pmem-state.img"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("a Pi image has %s", f)
		}
	}
	if err := CheckDisk(dir, im); err != nil {
		t.Error(err)
	}
	if err := CheckOut(dir); err != nil {
		t.Errorf("a rebuild would refuse its own Pi output: %v", err)
	}
	buildtest.NeedTools(t, "sfdisk", "e2fsck", "debugfs")
	if out, err := exec.Command("sfdisk", "--verify", disk).CombinedOutput(); err != nil || strings.Contains(string(out), "arning") {
		t.Errorf("sfdisk --verify: %v\n%s", err, out)
	}
	f, _ := os.Open(disk)
	tab, err := mbr.Read(f)
	f.Close()
	if err != nil || tab.Disk != contract.RPiDiskID || len(tab.Partitions) != 6 || tab.Part(5) == nil || tab.Part(1).Type != mbr.TypeFAT32LBA {
		t.Fatalf("the card's table: %+v, %v", tab, err)
	}
	parts := map[string]Partition{}
	for _, p := range im.Partitions {
		parts[p.Name] = p
	}
	a, err := tryboot.Parse(mtools(t, disk, parts[contract.PartConfig], "mtype", "::/autoboot.txt"))
	if err != nil || a != (tryboot.Autoboot{Boot: 2, TryBoot: 3, AB: true}) {
		t.Errorf("autoboot.txt: %+v, %v", a, err)
	}
	for slot, n := range map[string]string{"a": "05", "b": "06"} {
		p := parts[contract.BootPart(slot)]
		cmdline := string(mtools(t, disk, p, "mtype", "::/cmdline.txt"))
		if !strings.Contains(cmdline, "root=PARTUUID=6e76626f-"+n) || !strings.Contains(cmdline, "nvboot.slot="+slot) {
			t.Errorf("slot %s cmdline.txt %q", slot, cmdline)
		}
		ls := string(mtools(t, disk, p, "mdir", "-b", "::/"))
		for _, want := range []string{"vmlinuz", "bcm2710-rpi-3-b.dtb", "start4.elf", "config.txt"} {
			if !strings.Contains(ls, want) {
				t.Errorf("slot %s's boot partition lacks %s", slot, want)
			}
		}
		if cfg := string(mtools(t, disk, p, "mtype", "::/config.txt")); !strings.Contains(cfg, "arm_64bit=1\nkernel=vmlinuz\nenable_uart=1\n") {
			t.Errorf("slot %s config.txt:\n%s", slot, cfg)
		}
	}
	if out, err := exec.Command("fsck.vfat", "-n", disk+"").CombinedOutput(); err == nil {
		_ = out // the whole card is no FAT filesystem; each partition is checked below
	}
	// The root: e2fsck, nvinit's config, an aarch64 nvinit.
	root := filepath.Join(t.TempDir(), "root.ext4")
	copyPart(t, disk, parts[contract.PartRootA], root)
	if out, err := exec.Command("e2fsck", "-fn", root).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -fn root-a: %v\n%s", err, out)
	}
	var ic contract.InitConfig
	if err := json.Unmarshal(debugfsCat(t, root, contract.InitConfigPath), &ic); err != nil {
		t.Fatal(err)
	}
	if ic.State.Device != "/dev/mmcblk0p7" || ic.State.Options != "defaults" || ic.TextStore.Device != "" || ic.Slots == nil || ic.Slots.Firmware != contract.FirmwareTryboot {
		t.Errorf("nvinit's config: state %+v, store %+v, slots %+v", ic.State, ic.TextStore, ic.Slots)
	}
	nvinit := filepath.Join(t.TempDir(), "nvinit")
	os.WriteFile(nvinit, debugfsCat(t, root, contract.Init), 0o755)
	if e, err := elf.Open(nvinit); err != nil || e.Machine != elf.EM_AARCH64 {
		t.Errorf("nvinit on the root: %v", err)
	}
	// The data partition is the state filesystem.
	data := filepath.Join(t.TempDir(), "data.ext4")
	copyPart(t, disk, parts[contract.PartData], data)
	if out, err := exec.Command("e2fsck", "-fn", data).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -fn data: %v\n%s", err, out)
	}
}

// copyPart copies partition p of disk to a file.
func copyPart(t *testing.T, disk string, p Partition, dst string) {
	t.Helper()
	b := make([]byte, p.Bytes)
	f, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(b, p.Offset); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// debugfsCat reads a file of an ext4 image.
func debugfsCat(t *testing.T, img, path string) []byte {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", "cat "+path, img).Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("debugfs cat %s: %v", path, err)
	}
	return out
}

// TestImageIDNamesThePrograms: in the elf layout (no MANIFEST, a Pi's) the
// image id changes with any program, so nvboot update does not take a new
// image for the one running ("unchanged"); the same tree gives the same id.
func TestImageIDNamesThePrograms(t *testing.T) {
	root := t.TempDir()
	for p, text := range map[string]string{contract.InitConfigPath: "{}", contract.Init: "nvinit", contract.BinDir + "/kv": "kv 1"} {
		f := filepath.Join(root, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(f), 0o755)
		os.WriteFile(f, []byte(text), 0o755)
	}
	kernel := filepath.Join(t.TempDir(), "vmlinuz")
	os.WriteFile(kernel, []byte("kernel"), 0o644)
	b := &builder{Options: Options{Config: &config.Config{}, Kernel: kernel}}
	id := func() string {
		im := &Image{}
		if err := b.imageID(staging{root: root}, im); err != nil {
			t.Fatal(err)
		}
		return im.ID
	}
	first := id()
	if again := id(); again != first {
		t.Errorf("the same tree: ids %s and %s", first, again)
	}
	os.WriteFile(filepath.Join(root, "bin", "kv"), []byte("kv 2"), 0o755)
	if changed := id(); changed == first {
		t.Error("a changed service kept the image id")
	}
}
