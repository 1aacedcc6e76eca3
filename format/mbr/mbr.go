package mbr

import (
	"encoding/binary"
	"fmt"

	"github.com/nvboot/nvboot/format/diskimage"
)

// Partition type bytes (the system ID of an MBR entry).
const (
	TypeFAT32LBA    byte = 0x0C // FAT32 addressed by LBA: what the Pi firmware boots
	TypeLinux       byte = 0x83
	TypeExtendedLBA byte = 0x0F // the container of the logical partitions
	typeExtendedCHS byte = 0x05 // an EBR's link to the next one, and an old extended type
	typeExtendedLnx byte = 0x85
	typeProtective  byte = 0xEE // a GPT disk's protective MBR
)

const (
	sector    = diskimage.Sector
	alignLBAs = diskimage.AlignLBAs // 1 MiB, as partitioning tools place partitions
	// HeadBytes is the MBR: the first sector of a disk.
	HeadBytes = sector
	// maxLogical bounds the EBR chain Read follows (the kernel's msdos
	// parser stops at the same order of count).
	maxLogical = 128
)

// Partition is one partition to write: its contents come from a file
// (padded with zeros to Size), or it is empty.
type Partition struct {
	// Name names the partition in errors and in its Layout; an MBR has no
	// names.
	Name string
	Type byte
	// Size in bytes, rounded up to 1 MiB; 0: the size of Src.
	Size int64
	// Src is an image file to copy in; "": an empty partition.
	Src string
	// Logical puts the partition in the extended partition: it is
	// numbered 5, 6, ... in order. Logical partitions come after every
	// primary one.
	Logical bool
}

// Layout is where a partition is.
type Layout struct {
	Name string
	Type byte
	// Number is the partition's number as Linux counts it: the entry's
	// slot (1-4) for a primary partition, 5 and on for logical ones.
	Number      int
	First, Last int64 // LBAs, inclusive
}

// Bytes is the partition's size.
func (l Layout) Bytes() int64 { return (l.Last - l.First + 1) * sector }

// PARTUUID is how Linux names partition number of the disk with
// identifier disk (root=PARTUUID=...): the identifier in hex, a dash, the
// number in two hex digits.
func PARTUUID(disk uint32, number int) string { return fmt.Sprintf("%08x-%02x", disk, number) }

// Write writes the disk image to path (a temporary file, renamed into
// place: no partial image on failure): the MBR with disk identifier disk,
// the primary partitions, and when any partition is Logical an extended
// partition holding them, each behind its EBR. It returns the partitions'
// places, in parts' order.
func Write(path string, disk uint32, parts []Partition) ([]Layout, error) {
	if disk == 0 {
		return nil, fmt.Errorf("disk image %s: disk identifier 0: Linux names no partition of such a disk by PARTUUID", path)
	}
	primaries, logical := 0, false
	for _, p := range parts {
		switch {
		case p.Logical:
			logical = true
		case logical:
			return nil, fmt.Errorf("disk image %s: primary partition %s after a logical one: logical partitions come last", path, p.Name)
		default:
			primaries++
		}
	}
	if logical {
		primaries++ // the extended partition takes an entry
	}
	if primaries > 4 {
		return nil, fmt.Errorf("disk image %s: %d primary partitions (the extended one counted): an MBR holds 4; make some Logical", path, primaries)
	}
	lay := make([]Layout, len(parts))
	lba := int64(alignLBAs)
	var ext Layout // the extended partition, when there is one
	var ebrs []int64
	number, next := 1, 5
	for i := range parts {
		p := &parts[i]
		n, err := partLBAs(path, p)
		if err != nil {
			return nil, err
		}
		if p.Logical {
			if ext.Number == 0 {
				ext = Layout{Name: "extended", Type: TypeExtendedLBA, Number: number, First: lba}
			}
			// Each logical partition sits 1 MiB after its EBR.
			ebrs = append(ebrs, lba)
			lba += alignLBAs
			lay[i] = Layout{Name: p.Name, Type: p.Type, Number: next, First: lba, Last: lba + n - 1}
			next++
		} else {
			lay[i] = Layout{Name: p.Name, Type: p.Type, Number: number, First: lba, Last: lba + n - 1}
			number++
		}
		lba += n
	}
	if lba > 1<<32 {
		return nil, fmt.Errorf("disk image %s: %d bytes: an MBR addresses at most 2 TiB", path, lba*sector)
	}
	head := make([]byte, sector)
	binary.LittleEndian.PutUint32(head[440:], disk)
	slot := 0
	for _, l := range lay {
		if l.Number <= 4 {
			putEntry(head[446+16*slot:], l.Type, l.First, l.Last-l.First+1, 0)
			slot++
		}
	}
	logicals := lay[len(lay)-len(ebrs):]
	if ext.Number != 0 {
		ext.Last = lba - 1
		putEntry(head[446+16*slot:], ext.Type, ext.First, ext.Last-ext.First+1, 0)
	}
	head[510], head[511] = 0x55, 0xAA
	tabs := []diskimage.Table{{LBA: 0, Bytes: head}}
	for i, at := range ebrs {
		// An EBR: its logical partition relative to itself, the next EBR
		// relative to the extended partition's start.
		ebr := make([]byte, sector)
		l := logicals[i]
		putEntry(ebr[446:], l.Type, l.First-at, l.Last-l.First+1, at)
		if i+1 < len(ebrs) {
			nl := logicals[i+1]
			putEntry(ebr[462:], typeExtendedCHS, ebrs[i+1]-ext.First, nl.Last-ebrs[i+1]+1, ext.First)
		}
		ebr[510], ebr[511] = 0x55, 0xAA
		tabs = append(tabs, diskimage.Table{LBA: at, Bytes: ebr})
	}
	var srcs []diskimage.Source
	for i, p := range parts {
		if p.Src != "" {
			srcs = append(srcs, diskimage.Source{Name: p.Name, Src: p.Src, LBA: lay[i].First})
		}
	}
	if err := diskimage.Write(path, lba, tabs, srcs); err != nil {
		return nil, err
	}
	return lay, nil
}

// partLBAs is the sectors partition p takes.
func partLBAs(path string, p *Partition) (int64, error) {
	n, err := diskimage.LBAs(path, p.Name, p.Src, p.Size)
	if err != nil {
		return 0, err
	}
	if p.Type == 0 || isExtended(p.Type) || p.Type == typeProtective {
		return 0, fmt.Errorf("disk image %s: partition %s: type %#02x is not a partition's (empty, extended or GPT-protective)", path, p.Name, p.Type)
	}
	return n, nil
}

// putEntry writes a 16-byte partition entry: not bootable, type typ,
// starting rel sectors after base (the sector the entry's start counts
// from), n sectors long. The CHS fields are computed from the absolute
// LBAs with the usual 255 heads and 63 sectors a track, as partitioning
// tools write them; nothing reads them.
func putEntry(e []byte, typ byte, rel, n, base int64) {
	putCHS(e[1:4], base+rel)
	e[4] = typ
	putCHS(e[5:8], base+rel+n-1)
	binary.LittleEndian.PutUint32(e[8:], uint32(rel))
	binary.LittleEndian.PutUint32(e[12:], uint32(n))
}

func putCHS(b []byte, lba int64) {
	c, h, s := lba/(255*63), lba/63%255, lba%63+1
	if c > 1023 {
		c, h, s = 1023, 254, 63
	}
	b[0], b[1], b[2] = byte(h), byte(s)|byte(c>>2)&0xC0, byte(c)
}

func isExtended(t byte) bool {
	return t == TypeExtendedLBA || t == typeExtendedCHS || t == typeExtendedLnx
}
