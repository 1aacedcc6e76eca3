package appliance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/gpt"
	"github.com/nvboot/nvboot/format/initramfs"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/internal/atomicfile"
)

// CheckDisk checks the disk image of the image in dir before a boot: it has
// a valid partition table, it is as long as that table says (the backup
// header at its end, every partition inside it), and the partitions are
// where image.json says. A disk.img cut short (a copy interrupted, a full
// disk) otherwise boots into a kernel panic: the kernel finds no partition
// table, or no root partition. Nothing is written.
func CheckDisk(dir string, im *Image) error {
	if im.Board() == BoardRPi {
		return checkCard(dir, im) // rpidisk.go
	}
	path := filepath.Join(dir, im.Disk)
	rebuild := fmt.Sprintf("rebuild it with nvboot build -o %s (the device's state is kept)", dir)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("image %s: disk image: %w", dir, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("image %s: disk image: %w", dir, err)
	}
	size := st.Size()
	tab, err := gpt.Read(f)
	if err != nil {
		what := fmt.Sprintf("%d bytes", size)
		if size == 0 {
			what = "empty"
		}
		return fmt.Errorf("image %s: %s (%s): %v: not the disk image nvboot build wrote, or damaged; %s", dir, path, what, err, rebuild)
	}
	if err := checkPartitionsEnd(tab, size); err != nil {
		return fmt.Errorf("image %s: %s is %d bytes, but %w; %s", dir, path, size, err, rebuild)
	}
	if tab.Bytes() > size {
		return fmt.Errorf("image %s: %s is %d bytes, but its partition table puts the backup table at its end, byte %d: truncated (%d bytes missing); %s",
			dir, path, size, tab.Bytes(), tab.Bytes()-size, rebuild)
	}
	// image.json says where each partition is: the disk must be that
	// build's.
	for i, want := range im.Partitions {
		if i >= len(tab.Partitions) {
			return fmt.Errorf("image %s: %s says partition %d is %s, but %s's table has %d partitions: the disk is not the one image.json describes; %s",
				dir, outdir.ManifestFile, i+1, want.Name, path, len(tab.Partitions), rebuild)
		}
		p := tab.Partitions[i]
		off, n := p.First*512, (p.Last-p.First+1)*512
		if p.Name != want.Name || off != want.Offset || n != want.Bytes {
			return fmt.Errorf("image %s: %s says partition %d is %s at byte %d, %d bytes, but %s's table has %s at byte %d, %d bytes: the disk is not the one image.json describes; %s",
				dir, outdir.ManifestFile, i+1, want.Name, want.Offset, want.Bytes, path, p.Name, off, n, rebuild)
		}
	}
	return nil
}

// checkPartitionsEnd fails when a partition of tab ends past size bytes,
// naming the first such partition and, for each, what it lacks: the bytes
// past the end, or all of it. The whole image's shortfall (the backup
// table included) is said last: it is not any partition's.
func checkPartitionsEnd(tab *gpt.Table, size int64) error {
	var first string
	var lacks []string
	for _, p := range tab.Partitions {
		start, end := p.First*512, (p.Last+1)*512
		if end <= size {
			continue
		}
		if first == "" {
			first = fmt.Sprintf("its partition %s ends at byte %d", p.Name, end)
		}
		if start < size {
			lacks = append(lacks, fmt.Sprintf("partition %s lacks %d of its %d bytes", p.Name, end-size, end-start))
		} else {
			lacks = append(lacks, fmt.Sprintf("partition %s (%d bytes) is missing whole", p.Name, end-start))
		}
	}
	if first == "" {
		return nil
	}
	return fmt.Errorf("%s: truncated: %s (the whole image lacks %d bytes, its backup table included)", first, strings.Join(lacks, ", "), tab.Bytes()-size)
}

// disk is the last phase: the kernel, the root filesystem (or, in the
// initramfs layout, the initramfs), the kernel command line, the EFI system
// partition with the unified kernel image, the data partition, and the GPT
// disk image holding them.
func (b *builder) disk(ctx context.Context, st staging, im *Image) error {
	if b.Board == BoardRPi {
		return b.rpiDisk(ctx, st, im) // rpidisk.go
	}
	if err := copyFile(filepath.Join(b.dir, im.Kernel), b.Kernel, 0o644); err != nil {
		return err
	}
	if err := b.kernelRegion(im); err != nil {
		return err
	}
	rootImg, initrd, fs := "", "", ""
	// The root tree is complete but for the image id (which a base
	// leaves out).
	if err := b.base(st, im); err != nil { // base.go
		return err
	}
	if b.Layout == Initramfs {
		im.Initrd = outdir.InitrdFile
		initrd = filepath.Join(b.dir, outdir.InitrdFile)
		if err := writeInitramfs(st.root, initrd); err != nil {
			return err
		}
	} else {
		if b.Config.Slots == 2 {
			if err := b.imageID(st, im); err != nil {
				return err
			}
		}
		fs = b.Config.RootFSOrDefault()
		rootImg = filepath.Join(b.work, "root."+fs)
		b.logf("root filesystem: %s", fs)
		var err error
		if fs == "erofs" {
			err = mkErofs(ctx, st.root, rootImg, uuidFor(b.seed(), "root"))
		} else {
			var n int64
			n, _, err = treeSize(st.root, 1)
			if err == nil {
				err = mkExt4(ctx, st.root, rootImg, (n*5/4+(8<<20))&^(1<<20-1), uuidFor(b.seed(), "root"))
			}
		}
		if err != nil {
			return fmt.Errorf("root filesystem: %w", err)
		}
	}
	// cmdline is the kernel command line booting the root on dev.
	cmdline := func(dev, extra string) string {
		c := "rdinit=" + contract.Init
		if rootImg != "" {
			c = fmt.Sprintf("root=%s rootfstype=%s ro init=%s", dev, fs, contract.Init)
		}
		c += extra + " quiet"
		if !b.Config.NoBootTrims {
			c += " " + BootTrimsFor(b.Target)
		}
		if args := b.Config.KernelArgs(); args != "" {
			// KernelCmdline, then a gokrazy config's SerialConsole and
			// KernelExtraArgs.
			c += " " + args
		}
		return c
	}
	dataDir, dataImg := filepath.Join(b.work, "data"), filepath.Join(b.work, "data.ext4")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	if err := mkExt4(ctx, dataDir, dataImg, 16<<20, uuidFor(b.seed(), "data")); err != nil {
		return fmt.Errorf("data partition: %w", err)
	}
	var parts []gpt.Partition
	if b.Config.Slots == 2 {
		var err error
		parts, err = b.slotParts(ctx, st, im, rootImg, dataImg, cmdline)
		if err != nil {
			return err
		}
	} else {
		im.Cmdline = cmdline(contract.RootDevice, "")
		espImg, err := b.espImage(ctx, st.esp, im.Cmdline, initrd)
		if err != nil {
			return fmt.Errorf("EFI system partition: %w", err)
		}
		parts = []gpt.Partition{{Name: "esp", Type: gpt.TypeESP, Src: espImg}}
		if rootImg != "" {
			parts = append(parts, gpt.Partition{Name: "root", Type: rootType(b.Target), Src: rootImg})
		}
		parts = append(parts, gpt.Partition{Name: "data", Type: gpt.TypeLinuxData, Src: dataImg})
	}
	b.logf("disk image")
	lay, err := gpt.Write(filepath.Join(b.dir, outdir.DiskFile), b.seed(), parts)
	if err != nil {
		return err
	}
	for _, l := range lay {
		im.Partitions = append(im.Partitions, Partition{Name: l.Name, Offset: l.First * 512, Bytes: (l.Last - l.First + 1) * 512})
	}
	return nil
}

// BootTrims are kernel parameters that take what the appliance does not
// need out of the boot: PCI interrupts routed through the PIIX router instead
// of evaluating ACPI link objects (230 ms per virtio device under TCG), no
// PS/2 keyboard or mouse probe (600 ms before the root is mounted), and no
// check that the IO-APIC delivers the timer interrupt (no_timer_check: a
// busy wait for timer ticks, 11 ms of a 1-GIPS core's boot, for a fault of
// old chipsets). Measured on the device clock (nvboot measure -profile):
//
//   - rcupdate.rcu_expedited=1: RCU grace periods expedited after the boot
//     too, as the kernel has them during it. nvinit's cgroup setup for the
//     disk model (enabling a controller, moving itself) waits for two grace
//     periods, a few timer ticks each on an idle core; the first answer
//     came 14 ms sooner. An expedited grace period interrupts the other
//     cores, which an appliance's rare cgroup and mount changes can afford.
//   - noreplace-smp: on a board with one core the kernel rewrites the lock
//     prefix of every atomic instruction in its text at boot (1.7 ms); kept,
//     an atomic costs a little more. Boards with more cores rewrite nothing.
//   - dhash_entries=4096 ihash_entries=4096: dentry and inode hash tables
//     for an appliance's few files, not sized from the RAM (0.5 ms less
//     zeroing).
const BootTrims = "acpi=noirq i8042.noaux i8042.nokbd no_timer_check rcupdate.rcu_expedited=1 noreplace-smp dhash_entries=4096 ihash_entries=4096"

// writeInitramfs packs the root tree into a newc archive.
func writeInitramfs(root, out string) error {
	a := initramfs.New()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return a.Dir(rel, 0o755)
		}
		if d.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return a.Symlink(rel, target)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return a.File(rel, fi.Mode().Perm(), data)
	})
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if err := a.CharDev("dev/console", 0o600, 5, 1); err != nil {
		return err
	}
	return atomicfile.WriteFile(out, a.Bytes(), 0o644)
}
