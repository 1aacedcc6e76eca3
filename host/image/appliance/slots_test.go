package appliance

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// TestSlotsLayout builds a Slots 2 image and reads its disk back: the
// partitions in contract.SlotPartitions' order, each boot partition holding
// its slot's UKI whose command line names that slot's root and
// nvboot.slot, the ESP's BOOTX64.EFI slot A's UKI, both roots the same
// root filesystem (with the image id on it), and CheckDisk content.
func TestSlotsLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs and filesystems")
	}
	buildtest.NeedTools(t)
	k := buildtest.FakeKernel(t)
	cfg := config.Demo()
	cfg.Slots, cfg.TestBootDeadline = 2, "90s"
	dir := filepath.Join(t.TempDir(), "out")
	im := buildLayout(t, cfg, OFF2F, dir, k)
	var names []string
	for _, p := range im.Partitions {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, contract.SlotPartitions) {
		t.Fatalf("partitions %v, want %v", names, contract.SlotPartitions)
	}
	if im.Slots != 2 || im.Arch != "amd64" || len(im.ID) != 16 || im.RootBytes == 0 || im.BootBytes == 0 {
		t.Fatalf("image.json: Slots %d Arch %q ID %q RootBytes %d BootBytes %d", im.Slots, im.Arch, im.ID, im.RootBytes, im.BootBytes)
	}
	if err := CheckDisk(dir, im); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(dir, im.Disk)
	mtype := func(part, file string) []byte {
		p := im.Part(part)
		cmd := exec.Command("mtype", "-i", disk+"@@"+strconv.FormatInt(p.Offset, 10), "::"+file)
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("mtype %s %s: %v", part, file, err)
		}
		return out
	}
	for slot, root := range map[string]string{"a": "/dev/vda2", "b": "/dev/vda3"} {
		cmdline := SerialConsole + " root=" + root + " rootfstype=erofs ro init=" + contract.Init + " nvboot.slot=" + slot + " " + SlotPanic + " quiet " + BootTrims
		checkUKI(t, "amd64", mtype(contract.BootPart(slot), contract.SlotUKI), map[string]string{".osrel": osRelease(im.Hostname), ".cmdline": cmdline, ".linux": readString(t, k)})
		if contract.SlotDevice(contract.RootPart(slot)) != root {
			t.Errorf("slot %s's root device %s, the UKI boots %s", slot, contract.SlotDevice(contract.RootPart(slot)), root)
		}
	}
	if !bytes.Equal(mtype(contract.PartESP, "/"+ESPBoot), mtype(contract.PartBootA, contract.SlotUKI)) {
		t.Error("the ESP's BOOTX64.EFI is not slot A's UKI")
	}
	if !strings.Contains(im.Cmdline, "nvboot.slot=a") {
		t.Errorf("image.json's command line (QEMU -kernel boots) %q does not boot slot a", im.Cmdline)
	}
	f, err := os.ReadFile(disk)
	if err != nil {
		t.Fatal(err)
	}
	ra, rb := im.Part(contract.PartRootA), im.Part(contract.PartRootB)
	if ra.Bytes != rb.Bytes || ra.Bytes < 2*im.RootBytes {
		t.Errorf("roots of %d and %d bytes for a %d-byte root: want equal, with room to grow", ra.Bytes, rb.Bytes, im.RootBytes)
	}
	if !bytes.Equal(f[ra.Offset:ra.Offset+ra.Bytes], f[rb.Offset:rb.Offset+rb.Bytes]) {
		t.Error("root B is not root A")
	}
	if !bytes.Contains(f[ra.Offset:ra.Offset+im.RootBytes], []byte(im.ID+"\n")) {
		t.Error("the root does not hold the image id")
	}
}

// TestSlotsRefusesInitramfs: an initramfs has no root to put in a slot.
func TestSlotsRefusesInitramfs(t *testing.T) {
	cfg := config.Demo()
	cfg.Slots = 2
	_, err := Build(context.Background(), Options{Config: cfg, Layout: Initramfs, Out: filepath.Join(t.TempDir(), "out"), Kernel: "/nonexistent", ModuleRoot: "/nonexistent"})
	if err == nil || !strings.Contains(err.Error(), "Slots 2 with the initramfs layout") {
		t.Fatalf("error %v, want one naming Slots 2 and the initramfs layout", err)
	}
}
