package tryboot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// File is where a file's bytes are in a FAT filesystem: one extent.
type File struct {
	Offset, Size int64
}

// bpb is what Locate needs of a FAT boot sector (the BIOS parameter
// block), in bytes and sectors.
type bpb struct {
	sectorBytes   int64
	clusterBytes  int64
	dataStart     int64 // byte offset of cluster 2
	clusters      int64 // data clusters: numbered 2 .. clusters+1
	fat32         bool
	fatStart      int64 // byte offset of the first FAT
	rootStart     int64 // FAT12/16: the root directory's byte offset
	rootBytes     int64 // FAT12/16: its length
	rootCluster   int64 // FAT32: the root directory's first cluster
	totalBytes    int64
	fatEntryBytes int64 // 4 on FAT32; FAT12/16 chains are not followed
}

// maxDirBytes bounds the root directory Locate reads (FAT32's is a cluster
// chain): 64 Ki entries, FAT's own limit for a directory.
const maxDirBytes = 65536 * 32

func parseBPB(b []byte) (*bpb, error) {
	if len(b) < 512 || b[510] != 0x55 || b[511] != 0xAA {
		return nil, errors.New("not a FAT filesystem: no boot sector signature (55 AA)")
	}
	le16 := func(o int) int64 { return int64(binary.LittleEndian.Uint16(b[o:])) }
	le32 := func(o int) int64 { return int64(binary.LittleEndian.Uint32(b[o:])) }
	p := &bpb{sectorBytes: le16(11)}
	spc, reserved, fats, rootEntries := int64(b[13]), le16(14), int64(b[16]), le16(17)
	total, fatSize := le16(19), le16(22)
	if total == 0 {
		total = le32(32)
	}
	if fatSize == 0 {
		fatSize = le32(36)
	}
	switch {
	case p.sectorBytes != 512 && p.sectorBytes != 1024 && p.sectorBytes != 2048 && p.sectorBytes != 4096:
		return nil, fmt.Errorf("not a FAT filesystem: %d bytes a sector", p.sectorBytes)
	case spc == 0 || spc&(spc-1) != 0:
		return nil, fmt.Errorf("not a FAT filesystem: %d sectors a cluster", spc)
	case reserved == 0 || fats == 0 || fatSize == 0 || total == 0:
		return nil, fmt.Errorf("not a FAT filesystem: %d reserved sectors, %d FATs of %d sectors, %d sectors", reserved, fats, fatSize, total)
	}
	rootSectors := (rootEntries*32 + p.sectorBytes - 1) / p.sectorBytes
	first := reserved + fats*fatSize + rootSectors
	if first >= total {
		return nil, fmt.Errorf("not a FAT filesystem: its data would start at sector %d of %d", first, total)
	}
	p.clusterBytes = spc * p.sectorBytes
	p.clusters = (total - first) / spc
	p.dataStart = first * p.sectorBytes
	p.fatStart = reserved * p.sectorBytes
	p.totalBytes = total * p.sectorBytes
	// The FAT type follows from the cluster count alone (Microsoft's rule).
	p.fat32 = p.clusters >= 65525
	if p.fat32 {
		if rootEntries != 0 {
			return nil, fmt.Errorf("not a FAT filesystem: FAT32 with %d fixed root entries", rootEntries)
		}
		p.rootCluster, p.fatEntryBytes = le32(44)&0x0FFFFFFF, 4
		if p.rootCluster < 2 || p.rootCluster >= p.clusters+2 {
			return nil, fmt.Errorf("FAT32 root directory at cluster %d, outside clusters 2-%d", p.rootCluster, p.clusters+1)
		}
	} else {
		if rootEntries == 0 {
			return nil, errors.New("not a FAT filesystem: FAT12/16 without a root directory")
		}
		p.rootStart, p.rootBytes = (reserved+fats*fatSize)*p.sectorBytes, rootEntries*32
	}
	return p, nil
}

// clusterOffset is the byte offset of cluster c.
func (p *bpb) clusterOffset(c int64) int64 { return p.dataStart + (c-2)*p.clusterBytes }

// rootDir reads the root directory: FAT12/16's fixed region, or FAT32's
// cluster chain, followed for at most as many clusters as there are and
// maxDirBytes.
func (p *bpb) rootDir(r io.ReaderAt) ([]byte, error) {
	if !p.fat32 {
		b := make([]byte, p.rootBytes)
		if _, err := r.ReadAt(b, p.rootStart); err != nil {
			return nil, fmt.Errorf("reading the root directory: %w", err)
		}
		return b, nil
	}
	var dir []byte
	ent := make([]byte, 4)
	for c, n := p.rootCluster, int64(0); ; n++ {
		if n >= p.clusters || int64(len(dir)) >= maxDirBytes {
			return nil, errors.New("the FAT32 root directory's cluster chain does not end")
		}
		b := make([]byte, p.clusterBytes)
		if _, err := r.ReadAt(b, p.clusterOffset(c)); err != nil {
			return nil, fmt.Errorf("reading the root directory's cluster %d: %w", c, err)
		}
		dir = append(dir, b...)
		if _, err := r.ReadAt(ent, p.fatStart+c*p.fatEntryBytes); err != nil {
			return nil, fmt.Errorf("reading the FAT entry of cluster %d: %w", c, err)
		}
		next := int64(binary.LittleEndian.Uint32(ent) & 0x0FFFFFFF)
		if next >= 0x0FFFFFF8 {
			return dir, nil
		}
		if next < 2 || next >= p.clusters+2 {
			return nil, fmt.Errorf("the root directory's cluster %d links to cluster %d, outside clusters 2-%d", c, next, p.clusters+1)
		}
		c = next
	}
}

// shortName is name as an 8.3 directory entry has it: base and extension
// upper-cased and space-padded; ok is false when name has no such form.
func shortName(name string) (s [11]byte, ok bool) {
	base, ext, _ := strings.Cut(strings.ToUpper(name), ".")
	if base == "" || len(base) > 8 || len(ext) > 3 || strings.ContainsAny(base+ext, ". ") {
		return s, false
	}
	copy(s[:], strings.Repeat(" ", 11))
	copy(s[:], base)
	copy(s[8:], ext)
	return s, true
}

// Locate finds the file name in the root directory of the FAT12, 16 or 32
// filesystem r by its 8.3 short name (every long name has one, which
// mkfs.vfat, mtools and Linux write) and says where its bytes are. Only a
// file that fits in one cluster is located, so its bytes are one extent
// without reading the FAT. Every field that places something is checked
// against the filesystem's size: a damaged or hostile filesystem gives an
// error, never a place outside it.
func Locate(r io.ReaderAt, name string) (File, error) {
	want, ok := shortName(name)
	if !ok {
		return File{}, fmt.Errorf("%q has no 8.3 name", name)
	}
	boot := make([]byte, 512)
	if _, err := r.ReadAt(boot, 0); err != nil {
		return File{}, fmt.Errorf("reading the boot sector: %w", err)
	}
	p, err := parseBPB(boot)
	if err != nil {
		return File{}, err
	}
	dir, err := p.rootDir(r)
	if err != nil {
		return File{}, err
	}
	for i := 0; i+32 <= len(dir) && dir[i] != 0x00; i += 32 { // 00: the directory ends
		e := dir[i : i+32]
		switch {
		case e[0] == 0xE5, e[11]&0x0F == 0x0F, e[11]&0x18 != 0:
			continue // deleted, a long-name piece, a volume label or a directory
		}
		if [11]byte(e[:11]) != want {
			continue
		}
		c := int64(binary.LittleEndian.Uint16(e[26:]))
		if p.fat32 {
			c |= int64(binary.LittleEndian.Uint16(e[20:])) << 16
		}
		size := int64(binary.LittleEndian.Uint32(e[28:]))
		switch {
		case size == 0:
			return File{}, fmt.Errorf("%s is empty", name)
		case size > p.clusterBytes:
			return File{}, fmt.Errorf("%s is %d bytes, more than a cluster (%d): not one extent", name, size, p.clusterBytes)
		case c < 2 || c >= p.clusters+2:
			return File{}, fmt.Errorf("%s starts at cluster %d, outside clusters 2-%d", name, c, p.clusters+1)
		}
		off := p.clusterOffset(c)
		if off+size > p.totalBytes {
			return File{}, fmt.Errorf("%s at byte %d ends past the filesystem (%d bytes)", name, off, p.totalBytes)
		}
		return File{Offset: off, Size: size}, nil
	}
	return File{}, fmt.Errorf("no %s in the root directory", name)
}
