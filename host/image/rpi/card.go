package rpi

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/mbr"
	"github.com/nvboot/nvboot/host/image/config"
)

// Part is one partition of the card (contract.RPiPartitions) and how the
// MBR holds it.
type Part struct {
	contract.RPiPart
	Type byte
	// FAT says the firmware reads it: a FAT32 filesystem made from the
	// tree Trees writes.
	FAT     bool
	Logical bool
}

// Layout is the card's partitions for slots (1 or 2), in order: the FAT
// partitions primary, the roots and the data behind them (logical on a
// Slots 2 card, which has more than four).
func Layout(slots int) []Part {
	var parts []Part
	for _, p := range contract.RPiPartitions(slots) {
		fat := p.Number <= 3 && p.Name != contract.PartRoot && p.Name != contract.PartData
		typ := mbr.TypeLinux
		if fat {
			typ = mbr.TypeFAT32LBA
		}
		parts = append(parts, Part{RPiPart: p, Type: typ, FAT: fat, Logical: p.Number > 4})
	}
	return parts
}

// RootPARTUUID is the PARTUUID of the root slot boots on a card with slots
// (slot "" with one).
func RootPARTUUID(slots int, slot string) string {
	name := contract.PartRoot
	if slots == 2 {
		name = contract.RootPart(slot)
	}
	return mbr.PARTUUID(contract.RPiDiskID, contract.RPiPartNumber(slots, name))
}

// ConfigBytes is the size of a Slots 2 card's config partition: FAT32's
// smallest (65525 clusters of one sector) rounded up; a few MiB of files.
// A Pi 3 booted no FAT12 first partition, and gokrazy's are FAT32.
const ConfigBytes = 64 << 20

// MinBootBytes is the smallest boot partition: gokrazy's is 100 MiB.
const MinBootBytes = 128 << 20

// FATBytes sizes a FAT partition holding files of n bytes: the config
// partition ConfigBytes; a boot partition twice its files and 8 MiB (an
// update's kernel and firmware may be larger: a slot's boot partition is
// rewritten whole by every update, never resized), at least MinBootBytes,
// in whole MiB.
func FATBytes(name string, n int64) int64 {
	if name == contract.PartConfig {
		return ConfigBytes
	}
	return max(MinBootBytes, (2*n+8<<20+1<<20-1)&^(1<<20-1))
}

// Trees writes the tree of each FAT partition of a card with slots under
// work (work/NAME), and returns their directories by partition name: with
// one slot the boot partition (firmware, kernel, EEPROM files); with two
// the config partition (autoboot.txt booting slot A) and each slot's boot
// partition, whose cmdline.txt names that slot's root and nvboot.slot.
func (p *Parts) Trees(work string, c *config.Config, slots int) (map[string]string, error) {
	trees := map[string]string{}
	mk := func(name string) (string, error) {
		dir := filepath.Join(work, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		trees[name] = dir
		return dir, nil
	}
	if slots != 2 {
		dir, err := mk(contract.PartBoot)
		if err != nil {
			return nil, err
		}
		return trees, p.WriteBoot(dir, c, Cmdline(c, RootPARTUUID(slots, "")), true)
	}
	dir, err := mk(contract.PartConfig)
	if err != nil {
		return nil, err
	}
	if err := p.WriteConfigPartition(dir, contract.RPiPartNumber(2, contract.PartBootA), contract.RPiPartNumber(2, contract.PartBootB)); err != nil {
		return nil, err
	}
	for _, slot := range []string{"a", "b"} {
		dir, err := mk(contract.BootPart(slot))
		if err != nil {
			return nil, err
		}
		cmdline := Cmdline(c, RootPARTUUID(2, slot), fmt.Sprintf("%s=%s", contract.SlotParam, slot))
		if err := p.WriteBoot(dir, c, cmdline, false); err != nil {
			return nil, fmt.Errorf("slot %s's boot partition: %w", slot, err)
		}
	}
	return trees, nil
}

// Hash adds to h what a boot partition holds beyond the kernel: the
// firmware's and EEPROM's modules, and what config.txt and cmdline.txt
// take from c; with the kernel's hash it names a card's boot partitions.
func (p *Parts) Hash(h io.Writer, c *config.Config) {
	for _, m := range []*Module{p.Kernel, p.Firmware, p.EEPROM} {
		if m != nil {
			fmt.Fprintf(h, "module %s %s@%s\n", m.Package, m.Path, m.Version)
		}
	}
	fmt.Fprintf(h, "serial %q\nbootloader %q\n", c.SerialConsoleOrDefault(), c.BootloaderExtraLines)
}
