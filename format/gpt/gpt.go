package gpt

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unicode/utf16"

	"github.com/nvboot/nvboot/format/diskimage"
)

// Partition type GUIDs (the Discoverable Partitions Specification's where
// one exists).
var (
	TypeESP       = mustGUID("C12A7328-F81F-11D2-BA4B-00A0C93EC93B")
	TypeRootX8664 = mustGUID("4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709")
	TypeRootArm64 = mustGUID("B921B045-1DF0-41C3-AF44-4C6F280D3FAE")
	TypeLinuxData = mustGUID("0FC63DAF-8483-4772-8E79-3D69D8477DE4")
	// TypeXBOOTLDR is the extended boot loader partition: an A/B slot's
	// unified kernel image, on a FAT filesystem UEFI firmware reads.
	TypeXBOOTLDR = mustGUID("BC13C2FF-59E6-4262-A352-B275FD6F7172")
)

const (
	sector     = diskimage.Sector
	numEntries = 128
	entrySize  = 128
	entryLBAs  = numEntries * entrySize / sector // 32
	alignLBAs  = diskimage.AlignLBAs
)

// GUID is a GUID in its on-disk byte order (first three fields little-endian).
type GUID [16]byte

// mustGUID parses a GUID written the usual way. Without fmt: the type
// GUIDs are made at init, in every program that imports this package,
// nvinit among them, whose start is on the boot's critical path.
func mustGUID(s string) GUID {
	var raw [16]byte
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '-' && (i == 8 || i == 13 || i == 18 || i == 23) {
			continue
		}
		hi, lo := unhex(s[i]), byte(0xff)
		if i+1 < len(s) {
			lo = unhex(s[i+1])
		}
		if n == 16 || hi > 15 || lo > 15 {
			panic("gpt: bad GUID " + s)
		}
		raw[n] = hi<<4 | lo
		n, i = n+1, i+1
	}
	if n != 16 || len(s) != 36 {
		panic("gpt: bad GUID " + s)
	}
	var g GUID
	binary.LittleEndian.PutUint32(g[0:], binary.BigEndian.Uint32(raw[0:]))
	binary.LittleEndian.PutUint16(g[4:], binary.BigEndian.Uint16(raw[4:]))
	binary.LittleEndian.PutUint16(g[6:], binary.BigEndian.Uint16(raw[6:]))
	copy(g[8:], raw[8:])
	return g
}

// unhex is a hex digit's value, or 0xff.
func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 0xff
}

// String formats g the usual way.
func (g GUID) String() string {
	return fmt.Sprintf("%08X-%04X-%04X-%X-%X", binary.LittleEndian.Uint32(g[0:]), binary.LittleEndian.Uint16(g[4:]),
		binary.LittleEndian.Uint16(g[6:]), g[8:10], g[10:])
}

// derive makes a version-4-shaped GUID from the seed and a name.
func derive(seed, name string) GUID {
	h := sha256.Sum256([]byte("nvboot-gpt\x00" + seed + "\x00" + name))
	var g GUID
	copy(g[:], h[:16])
	g[7] = g[7]&0x0f | 0x40
	g[8] = g[8]&0x3f | 0x80
	return g
}

// Partition is one partition: its contents come from a file (padded with
// zeros to Size), or it is empty.
type Partition struct {
	Name string // GPT partition name, also the GUID seed
	Type GUID
	Size int64  // bytes; rounded up to 1 MiB; 0: the size of Source
	Src  string // image file to copy in; "" for an empty partition
}

// Layout is where Write placed a partition.
type Layout struct {
	Name         string
	Type, Unique GUID
	First, Last  int64 // LBAs, inclusive
}

// Write writes the disk image to path (temporary file, then rename: no
// partial image on failure) and returns the partitions' places.
func Write(path, seed string, parts []Partition) ([]Layout, error) {
	lba := int64(alignLBAs)
	var lay []Layout
	for i := range parts {
		p := &parts[i]
		n, err := diskimage.LBAs(path, p.Name, p.Src, p.Size)
		if err != nil {
			return nil, err
		}
		lay = append(lay, Layout{Name: p.Name, Type: p.Type, Unique: derive(seed, p.Name), First: lba, Last: lba + n - 1})
		lba += n
	}
	total := lba + 1 + entryLBAs // backup entries and header
	entries := make([]byte, numEntries*entrySize)
	for i, l := range lay {
		e := entries[i*entrySize:]
		copy(e[0:], l.Type[:])
		copy(e[16:], l.Unique[:])
		binary.LittleEndian.PutUint64(e[32:], uint64(l.First))
		binary.LittleEndian.PutUint64(e[40:], uint64(l.Last))
		for j, u := range utf16.Encode([]rune(l.Name)) {
			if j >= 36 {
				break
			}
			binary.LittleEndian.PutUint16(e[56+2*j:], u)
		}
	}
	head, tail := tables(entries, derive(seed, "\x00disk"), total)
	var srcs []diskimage.Source
	for i, p := range parts {
		if p.Src != "" {
			srcs = append(srcs, diskimage.Source{Name: p.Name, Src: p.Src, LBA: lay[i].First})
		}
	}
	tabs := []diskimage.Table{{LBA: 0, Bytes: head}, {LBA: total - int64(len(tail))/sector, Bytes: tail}}
	if err := diskimage.Write(path, total, tabs, srcs); err != nil {
		return nil, err
	}
	return lay, nil
}

// tables lays out the partition tables of a disk of total LBAs: head is the
// protective MBR, the primary header and the entry array (LBAs 0..33), tail
// the backup entry array and header (the last 33 LBAs).
func tables(entries []byte, disk GUID, total int64) (head, tail []byte) {
	last := total - 1
	entCRC := crc32.ChecksumIEEE(entries)
	header := func(h []byte, cur, backup, entLBA int64) {
		copy(h, "EFI PART")
		binary.LittleEndian.PutUint32(h[8:], 0x00010000)
		binary.LittleEndian.PutUint32(h[12:], 92)
		binary.LittleEndian.PutUint64(h[24:], uint64(cur))
		binary.LittleEndian.PutUint64(h[32:], uint64(backup))
		binary.LittleEndian.PutUint64(h[40:], uint64(2+entryLBAs))
		binary.LittleEndian.PutUint64(h[48:], uint64(last-1-entryLBAs))
		copy(h[56:], disk[:])
		binary.LittleEndian.PutUint64(h[72:], uint64(entLBA))
		binary.LittleEndian.PutUint32(h[80:], numEntries)
		binary.LittleEndian.PutUint32(h[84:], entrySize)
		binary.LittleEndian.PutUint32(h[88:], entCRC)
		binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h[:92]))
	}
	head = make([]byte, HeadBytes)
	pe := head[446:]
	pe[4] = 0xEE // protective: the whole disk is GPT
	binary.LittleEndian.PutUint32(pe[8:], 1)
	binary.LittleEndian.PutUint32(pe[12:], uint32(min(last, 0xFFFFFFFF)))
	head[510], head[511] = 0x55, 0xAA
	header(head[sector:2*sector], 1, last, 2)
	copy(head[2*sector:], entries)
	tail = make([]byte, (entryLBAs+1)*sector)
	copy(tail, entries)
	header(tail[entryLBAs*sector:], last, 1, last-entryLBAs)
	return head, tail
}

// HeadBytes is the size of the table at the start of an image: protective
// MBR, primary header, entry array.
const HeadBytes = (2 + entryLBAs) * sector

// Fit adjusts the table at the start of an image made by Write (head, its
// first HeadBytes, changed in place) for a device of devSize bytes, as
// flashing onto a bigger card needs: head becomes what Write would have made
// for a disk of that size (backup at the device's last LBAs, usable area and
// protective MBR grown with it), and the backup copy to write at
// devSize-len(tail) is returned. Partitions stay where they are; on error
// head is unchanged.
func Fit(head []byte, devSize int64) (tail []byte, err error) {
	if len(head) != HeadBytes {
		return nil, fmt.Errorf("gpt: table is %d bytes, want %d", len(head), HeadBytes)
	}
	if devSize%sector != 0 {
		return nil, fmt.Errorf("gpt: device size %d is not a multiple of %d", devSize, sector)
	}
	mbr, h, entries := head[:sector], head[sector:2*sector], head[2*sector:]
	if mbr[510] != 0x55 || mbr[511] != 0xAA || mbr[446+4] != 0xEE {
		return nil, fmt.Errorf("gpt: no protective MBR")
	}
	if string(h[:8]) != "EFI PART" || binary.LittleEndian.Uint32(h[12:]) != 92 {
		return nil, fmt.Errorf("gpt: no GPT header at LBA 1")
	}
	hc := append([]byte(nil), h[:92]...) // the checksum is over the header with its own field zero
	binary.LittleEndian.PutUint32(hc[16:], 0)
	if crc32.ChecksumIEEE(hc) != binary.LittleEndian.Uint32(h[16:]) {
		return nil, fmt.Errorf("gpt: header checksum mismatch")
	}
	if binary.LittleEndian.Uint32(h[80:]) != numEntries || binary.LittleEndian.Uint32(h[84:]) != entrySize ||
		binary.LittleEndian.Uint64(h[72:]) != 2 {
		return nil, fmt.Errorf("gpt: entry array not the one Write makes")
	}
	if crc32.ChecksumIEEE(entries) != binary.LittleEndian.Uint32(h[88:]) {
		return nil, fmt.Errorf("gpt: entry array checksum mismatch")
	}
	last := devSize/sector - 1
	lastUsable := last - 1 - entryLBAs
	for i := 0; i < numEntries; i++ {
		e := entries[i*entrySize:]
		if end := int64(binary.LittleEndian.Uint64(e[40:])); end > lastUsable {
			return nil, fmt.Errorf("gpt: partition %d ends at LBA %d, beyond the device's last usable LBA %d", i+1, end, lastUsable)
		}
	}
	var disk GUID
	copy(disk[:], h[56:72])
	newHead, tail := tables(entries, disk, last+1)
	copy(head, newHead)
	return tail, nil
}
