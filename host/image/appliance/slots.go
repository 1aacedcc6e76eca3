package appliance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/gpt"
)

// A Slots 2 disk (contract.SlotPartitions): the ESP with EFI/BOOT/BOOTX64.EFI
// (slot A's UKI, for a board whose NVRAM has no entry yet), root A, root
// B, boot A and boot B (each a FAT filesystem holding its slot's UKI at
// contract.SlotUKI, whose command line names that slot's root and
// nvboot.slot), data. Both slots hold the image as built, so a flashed
// card boots either.
//
// Roots are named by device (/dev/vda2, /dev/vda3), not PARTUUID: the
// partitions' GUIDs derive from the hostname and layout, and an update to
// an image of another hostname must still find its root.

// SlotPanic is on a slot's command line: a kernel that panics (no root, a
// broken init) resets the board after 10 s, and the reset boots the
// committed slot.
const SlotPanic = "panic=10"

// rootHeadroom sizes a slot's root partition: the root filesystem twice,
// and at least 64 MiB beyond it, so later images may grow.
func rootHeadroom(n int64) int64 { return max(2*n, n+64<<20) }

// slotParts makes the slots' partitions; cmdline gives the command line
// booting a root device with extra parameters.
func (b *builder) slotParts(ctx context.Context, st staging, im *Image, rootImg, dataImg string, cmdline func(dev, extra string) string) ([]gpt.Partition, error) {
	rst, err := os.Stat(rootImg)
	if err != nil {
		return nil, err
	}
	im.Slots, im.RootBytes = 2, rst.Size()
	rootSize := (rootHeadroom(rst.Size()) + 1<<20 - 1) &^ (1<<20 - 1)
	boots := map[string]string{}
	for _, slot := range []string{"a", "b"} {
		c := cmdline(contract.SlotDevice(contract.RootPart(slot)), fmt.Sprintf(" %s=%s %s", contract.SlotParam, slot, SlotPanic))
		if slot == "a" {
			// QEMU's -kernel boots (nvboot run) boot slot A.
			im.Cmdline = c
		}
		img, size, err := b.slotBoot(ctx, slot, c)
		if err != nil {
			return nil, fmt.Errorf("slot %s's boot partition: %w", slot, err)
		}
		boots[slot] = img
		im.BootBytes = max(im.BootBytes, size)
	}
	uki := filepath.Join(st.esp, filepath.FromSlash(espBoot(b.Target)))
	if err := os.MkdirAll(filepath.Dir(uki), 0o755); err != nil {
		return nil, err
	}
	if err := copyFile(uki, filepath.Join(b.work, "boot-a", filepath.FromSlash(strings.TrimPrefix(contract.SlotUKI, "/"))), 0o644); err != nil {
		return nil, err
	}
	esp, err := b.vfatOf(ctx, st.esp, uki, "esp")
	if err != nil {
		return nil, fmt.Errorf("EFI system partition: %w", err)
	}
	byName := map[string]gpt.Partition{
		contract.PartESP:   {Type: gpt.TypeESP, Src: esp},
		contract.PartRootA: {Type: rootType(b.Target), Src: rootImg, Size: rootSize},
		contract.PartRootB: {Type: rootType(b.Target), Src: rootImg, Size: rootSize},
		contract.PartBootA: {Type: gpt.TypeXBOOTLDR, Src: boots["a"]},
		contract.PartBootB: {Type: gpt.TypeXBOOTLDR, Src: boots["b"]},
		contract.PartData:  {Type: gpt.TypeLinuxData, Src: dataImg},
	}
	var parts []gpt.Partition
	for _, n := range contract.SlotPartitions {
		p := byName[n]
		p.Name = n
		parts = append(parts, p)
	}
	return parts, nil
}

// slotBoot makes slot's boot partition: a FAT filesystem with its UKI, sized
// for the UKI twice over (a later kernel may be larger). It returns the
// filesystem image and its size.
func (b *builder) slotBoot(ctx context.Context, slot, cmdline string) (string, int64, error) {
	dir := filepath.Join(b.work, "boot-"+slot)
	uki := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(contract.SlotUKI, "/")))
	if err := os.MkdirAll(filepath.Dir(uki), 0o755); err != nil {
		return "", 0, err
	}
	b.logf("unified kernel image: slot %s", slot)
	if err := writeUKI(ctx, b.Target.GOARCH(), uki, filepath.Join(b.work, "uki-"+slot), b.Kernel, serialConsole(b.Target)+" "+cmdline,
		osRelease(b.Config.HostnameOrDefault()), ""); err != nil {
		return "", 0, err
	}
	img, err := b.vfatOf(ctx, dir, uki, "boot-"+slot)
	if err != nil {
		return "", 0, err
	}
	st, err := os.Stat(img)
	if err != nil {
		return "", 0, err
	}
	return img, st.Size(), nil
}

// vfatOf makes a FAT filesystem image of dir, big enough for the file big
// twice over and 4 MiB more.
func (b *builder) vfatOf(ctx context.Context, dir, big, name string) (string, error) {
	st, err := os.Stat(big)
	if err != nil {
		return "", err
	}
	img := filepath.Join(b.work, name+".vfat")
	size := (2*st.Size() + (4 << 20)) &^ (1<<20 - 1)
	if err := mkVfat(ctx, dir, img, size, volID(b.seed()+"/"+name)); err != nil {
		return "", err
	}
	return img, nil
}

// imageID names the image by what it runs: its nvinit config, MANIFEST
// (every program's text; without one, the elf layout's, the programs
// themselves), the kernel, its command line's variable parts and the
// architecture, and a Pi's boot partition's other parts; it is written to
// the root (contract.ImageIDPath) before the root filesystem is made, so the
// appliance can say which image it runs.
func (b *builder) imageID(st staging, im *Image) error {
	h := sha256.New()
	for _, p := range []string{contract.InitConfigPath, contract.Manifest} {
		data, err := os.ReadFile(filepath.Join(st.root, filepath.FromSlash(p)))
		if err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("image id: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", p, len(data))
		h.Write(data)
		if p == contract.Manifest && os.IsNotExist(err) {
			if err := hashPrograms(h, st.root); err != nil {
				return fmt.Errorf("image id: %w", err)
			}
		}
	}
	k, err := sha256File(b.Kernel)
	if err != nil {
		return fmt.Errorf("image id: %w", err)
	}
	fmt.Fprintf(h, "kernel %s\narch %s\nargs %q\ntrims %v\n", k, im.Arch, b.Config.KernelArgs(), !b.Config.NoBootTrims)
	if b.Board == BoardRPi {
		fmt.Fprintf(h, "board %s\n", b.Board)
		b.rpi.Hash(h, b.Config)
	}
	im.ID = hex.EncodeToString(h.Sum(nil))[:16]
	return os.WriteFile(filepath.Join(st.root, filepath.FromSlash(contract.ImageIDPath)), []byte(im.ID+"\n"), 0o644)
}

// hashPrograms adds nvinit's and the services' executables under root to h,
// each by its path and SHA-256.
func hashPrograms(h io.Writer, root string) error {
	paths := []string{contract.Init}
	ents, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(contract.BinDir)))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, e := range ents {
		paths = append(paths, contract.BinDir+"/"+e.Name())
	}
	for _, p := range paths {
		sum, err := sha256File(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "program %s %s\n", p, sum)
	}
	return nil
}
