package gpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"unicode/utf16"
)

// Table is a disk image's partition table as Read found it.
type Table struct {
	// BackupLBA is where the header says the backup header is: the disk's
	// last LBA, so a whole image is (BackupLBA+1)*512 bytes.
	BackupLBA int64
	// Partitions are the used entries, in entry order.
	Partitions []Layout
}

// Bytes is the size of the disk the table describes.
func (t *Table) Bytes() int64 { return (t.BackupLBA + 1) * sector }

// Read reads and checks the primary table of the disk image r: the
// protective MBR, the header (signature, size, CRC) and the entry array
// (CRC). The backup is not read: a caller compares BackupLBA with the size.
func Read(r io.ReaderAt) (*Table, error) {
	head := make([]byte, 2*sector)
	if _, err := r.ReadAt(head, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("gpt: no GPT: shorter than a protective MBR and a header")
		}
		return nil, fmt.Errorf("gpt: %w", err)
	}
	mbr, h := head[:sector], head[sector:]
	if mbr[510] != 0x55 || mbr[511] != 0xAA || mbr[446+4] != 0xEE {
		return nil, errors.New("gpt: no GPT: no protective MBR")
	}
	if string(h[:8]) != "EFI PART" {
		return nil, errors.New("gpt: no GPT: no header at LBA 1")
	}
	hsize := binary.LittleEndian.Uint32(h[12:])
	if hsize < 92 || hsize > sector {
		return nil, fmt.Errorf("gpt: header size %d", hsize)
	}
	hc := append([]byte(nil), h[:hsize]...) // the checksum is over the header with its own field zero
	binary.LittleEndian.PutUint32(hc[16:], 0)
	if crc32.ChecksumIEEE(hc) != binary.LittleEndian.Uint32(h[16:]) {
		return nil, errors.New("gpt: header checksum mismatch")
	}
	entLBA := int64(binary.LittleEndian.Uint64(h[72:]))
	n, size := binary.LittleEndian.Uint32(h[80:]), binary.LittleEndian.Uint32(h[84:])
	if size < 128 || size%8 != 0 || n == 0 || uint64(n)*uint64(size) > 1<<20 {
		return nil, fmt.Errorf("gpt: entry array of %d entries of %d bytes", n, size)
	}
	entries := make([]byte, int(n)*int(size))
	if _, err := r.ReadAt(entries, entLBA*sector); err != nil {
		return nil, fmt.Errorf("gpt: reading the entry array at LBA %d: %w", entLBA, err)
	}
	if crc32.ChecksumIEEE(entries) != binary.LittleEndian.Uint32(h[88:]) {
		return nil, errors.New("gpt: entry array checksum mismatch")
	}
	t := &Table{BackupLBA: int64(binary.LittleEndian.Uint64(h[32:]))}
	for i := 0; i < int(n); i++ {
		e := entries[i*int(size):][:size]
		var l Layout
		copy(l.Type[:], e[0:16])
		if l.Type == (GUID{}) {
			continue
		}
		copy(l.Unique[:], e[16:32])
		l.First, l.Last = int64(binary.LittleEndian.Uint64(e[32:])), int64(binary.LittleEndian.Uint64(e[40:]))
		name := make([]uint16, 0, 36)
		for j := 0; j < 36; j++ {
			u := binary.LittleEndian.Uint16(e[56+2*j:])
			if u == 0 {
				break
			}
			name = append(name, u)
		}
		l.Name = string(utf16.Decode(name))
		t.Partitions = append(t.Partitions, l)
	}
	return t, nil
}
