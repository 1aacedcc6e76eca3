package appliance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/mbr"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/image/rpi"
)

// A Raspberry Pi image (Options.Board BoardRPi): the elf layout's arm64
// programs on an ext4 root (the Pi kernel has no erofs), the state's
// filesystem on the card's data partition, the boot partitions host/image/rpi
// fills from the config's KernelPackage, FirmwarePackage and EEPROMPackage,
// and an MBR card (contract.RPiPartitions) holding them. No pmem images, no
// kernel file beside the disk: the kernel is on the card.

// RPiImage says what an image is on a Raspberry Pi, for the line a build
// prints after its target.
const RPiImage = "a Raspberry Pi image: a Pi has no persistent memory, so the image is the elf layout " +
	"(nvinit and the services plain arm64 programs on the card's ext4 root, no text store) and pheap's state " +
	"lives on the card's data partition (ext4 on " + contract.StateDir + "), each transaction durable when it commits by msync " +
	"(MS_SYNC: the dirty pages written and the card's cache flushed, as fsync does); " +
	"the card: an MBR table, the boot partitions from KernelPackage, FirmwarePackage and EEPROMPackage"

// checkBoard refuses what a board cannot build, naming why.
func checkBoard(o *Options) error {
	switch o.Board {
	case BoardPC:
		return nil
	case BoardRPi:
	default:
		return fmt.Errorf("board %q: unknown (want %q or %q)", o.Board, BoardPC, BoardRPi)
	}
	c := o.Config
	switch {
	case o.Layout != ELF:
		return fmt.Errorf("layout %s on a Raspberry Pi: a Pi has no persistent memory, which the %s, %s and %s layouts' text store or RAM root need; build the %s layout (programs on the card, the state on its data partition)",
			o.Layout, OFF2F, DAXELF, Initramfs, ELF)
	case c.RootFS != "" && c.RootFS != "ext4":
		return fmt.Errorf("config: RootFS %q on a Raspberry Pi: its kernel (KernelPackage) has no %s; leave RootFS out (ext4)", c.RootFS, c.RootFS)
	case o.Kernel != "":
		return fmt.Errorf("kernel %s on a Raspberry Pi: a Pi boots KernelPackage's kernel (%s), from its boot partition; give no kernel", o.Kernel, c.KernelPackageOrDefault())
	case c.KernelPath != "":
		return fmt.Errorf("config: KernelPath %s on a Raspberry Pi: a Pi boots KernelPackage's kernel (%s); leave KernelPath out", c.KernelPath, c.KernelPackageOrDefault())
	case c.HasShell():
		return fmt.Errorf("config: Userland %q on a Raspberry Pi: a Pi card carries no userland yet (its shell on the Pi's console is untested); leave Userland out", c.Userland)
	}
	return nil
}

// rpiParts fetches the Pi's packages (a Pi image only); the kernel is then
// the kernel package's.
func (b *builder) rpiParts(ctx context.Context) error {
	if b.Board != BoardRPi {
		return nil
	}
	p, err := rpi.Fetch(ctx, b.Config, b.ConfigDir, b.logf)
	if err != nil {
		return fmt.Errorf("Raspberry Pi parts: %w", err)
	}
	b.rpi, b.Kernel = p, filepath.Join(p.Kernel.Dir, rpi.Kernel)
	return nil
}

// rpiDisk is the disk phase of a Pi image: the root filesystem, the boot
// partitions (and with Slots 2 the config partition), the data partition
// holding the state filesystem, and the MBR card.
func (b *builder) rpiDisk(ctx context.Context, st staging, im *Image) error {
	slots := max(b.Config.Slots, 1)
	// The root tree is complete but for the image id (which a base
	// leaves out): what nvboot push annotates and nvpull compares.
	if err := b.base(st, im); err != nil { // base.go
		return err
	}
	if slots == 2 {
		if err := b.imageID(st, im); err != nil {
			return err
		}
	}
	rootImg := filepath.Join(b.work, "root.ext4")
	n, _, err := treeSize(st.root, 1)
	if err == nil {
		b.logf("root filesystem: ext4")
		err = mkExt4(ctx, st.root, rootImg, (n*5/4+(8<<20))&^(1<<20-1), uuidFor(b.seed(), "root"))
	}
	if err != nil {
		return fmt.Errorf("root filesystem: %w", err)
	}
	rst, err := os.Stat(rootImg)
	if err != nil {
		return err
	}
	b.logf("Raspberry Pi boot partitions (%s)", b.rpi.Kernel.Package)
	trees, err := b.rpi.Trees(filepath.Join(b.work, "rpi"), b.Config, slots)
	if err != nil {
		return fmt.Errorf("Raspberry Pi boot partitions: %w", err)
	}
	var parts []mbr.Partition
	for _, p := range rpi.Layout(slots) {
		mp := mbr.Partition{Name: p.Name, Type: p.Type, Logical: p.Logical}
		switch {
		case p.FAT:
			files, _, err := treeSize(trees[p.Name], 1)
			if err != nil {
				return err
			}
			size := rpi.FATBytes(p.Name, files)
			mp.Src = filepath.Join(b.work, p.Name+".vfat")
			label := strings.ToUpper(p.Name)
			if err := mkVfat(ctx, trees[p.Name], mp.Src, size, volID(b.seed()+"/"+p.Name), "-F", "32", "-n", label); err != nil {
				return fmt.Errorf("%s partition: %w", p.Name, err)
			}
			if p.Name != contract.PartConfig {
				im.BootBytes = max(im.BootBytes, size)
			}
		case p.Name == contract.PartData:
			mp.Src = filepath.Join(b.work, "state.ext4") // the state phase's filesystem
		default: // a root
			mp.Src = rootImg
			if slots == 2 {
				mp.Size = (rootHeadroom(rst.Size()) + 1<<20 - 1) &^ (1<<20 - 1)
			}
		}
		parts = append(parts, mp)
	}
	if slots == 2 {
		im.Slots, im.RootBytes = 2, rst.Size()
	} else {
		im.BootBytes = 0
	}
	im.Cmdline = rpi.Cmdline(b.Config, rpi.RootPARTUUID(slots, "a"))
	if slots == 2 {
		im.Cmdline = rpi.Cmdline(b.Config, rpi.RootPARTUUID(slots, "a"), contract.SlotParam+"=a")
	}
	b.logf("disk image (MBR: the Pi 3's boot ROM reads no GPT)")
	lay, err := mbr.Write(filepath.Join(b.dir, outdir.DiskFile), contract.RPiDiskID, parts)
	if err != nil {
		return err
	}
	for _, l := range lay {
		im.Partitions = append(im.Partitions, Partition{Name: l.Name, Offset: l.First * 512, Bytes: l.Bytes()})
	}
	return nil
}

// checkCard is CheckDisk for a Pi image: its MBR, each partition inside
// the file and where image.json says.
func checkCard(dir string, im *Image) error {
	path := filepath.Join(dir, im.Disk)
	rebuild := fmt.Sprintf("rebuild it with nvboot build -o %s", dir)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("image %s: disk image: %w", dir, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("image %s: disk image: %w", dir, err)
	}
	tab, err := mbr.Read(f)
	if err != nil {
		return fmt.Errorf("image %s: %s (%d bytes): %v: not the card nvboot build wrote, or damaged; %s", dir, path, st.Size(), err, rebuild)
	}
	if tab.Bytes() > st.Size() {
		return fmt.Errorf("image %s: %s is %d bytes, but its partitions end at byte %d: truncated; %s", dir, path, st.Size(), tab.Bytes(), rebuild)
	}
	if len(tab.Partitions) != len(im.Partitions) {
		return fmt.Errorf("image %s: %s says %d partitions, %s's table has %d; %s", dir, outdir.ManifestFile, len(im.Partitions), path, len(tab.Partitions), rebuild)
	}
	for i, want := range im.Partitions {
		l := tab.Partitions[i]
		if l.First*512 != want.Offset || l.Bytes() != want.Bytes {
			return fmt.Errorf("image %s: %s says partition %s is at byte %d, %d bytes, but %s's partition %d is at byte %d, %d bytes; %s",
				dir, outdir.ManifestFile, want.Name, want.Offset, want.Bytes, path, l.Number, l.First*512, l.Bytes(), rebuild)
		}
	}
	return nil
}
