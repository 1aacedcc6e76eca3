package fsdax

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// The info block sits 4 KiB into the namespace and is 4 KiB long. Fields
// (little-endian), as struct nd_pfn_sb in drivers/nvdimm/pfn.h:
//
//	0    [16] signature "NVDIMM_PFN_INFO\0"
//	16   [16] uuid of the pfn device
//	32   [16] parent uuid: the namespace's (zero when label-less)
//	48   u32  flags (0)
//	52   u16  version major (1)
//	54   u16  version minor (4: padding and flags zero, page sizes recorded)
//	56   u64  dataoff: where the data starts, from the namespace start
//	64   u64  npfns: pages of data
//	72   u32  mode: 1 = struct pages in RAM, 2 = in pmem
//	76   u32  start_pad (deprecated, 0)
//	80   u32  end_trunc: bytes cut off the end for alignment
//	84   u32  align: the mapping alignment (2 MiB: PMD mappings)
//	88   u32  page_size (4096)
//	92   u16  page_struct_size (64)
//	94   [3994] zero
//	4088 u64  checksum: Fletcher-64 over the block with this field zero
const (
	InfoOffset = 4096
	InfoSize   = 4096
	signature  = "NVDIMM_PFN_INFO\x00"
	// ModeRAM keeps the struct pages for the pmem in DRAM (64 bytes per 4 KiB):
	// nothing of the pmem is spent on them, and the data offset stays 2 MiB.
	ModeRAM = 1
	// Align is the mapping alignment written: 2 MiB, so DAX can map 2 MiB
	// extents with one page-table entry.
	Align = 2 << 20
)

// Info is the content of a PFN info block.
type Info struct {
	UUID     [16]byte
	Parent   [16]byte
	Major    uint16
	Minor    uint16
	DataOff  uint64
	NPFNs    uint64
	Mode     uint32
	EndTrunc uint32
	Align    uint32
	PageSize uint32
	PageSt   uint16
}

// NewInfo returns the info block Linux writes for a label-less namespace of
// size bytes, starting 2 MiB-aligned in physical memory, in RAM mode with
// 2 MiB alignment.
func NewInfo(size int64, uuid [16]byte) (*Info, error) {
	if size <= 0 || size%Align != 0 {
		return nil, fmt.Errorf("pmem: size %d is not a positive multiple of 2 MiB", size)
	}
	dataOff := uint64(Align) // ALIGN(start + 8 KiB, 2 MiB) - start for a 2 MiB-aligned start
	if uint64(size) <= dataOff {
		return nil, fmt.Errorf("pmem: size %d leaves no room for data after the 2 MiB metadata", size)
	}
	return &Info{UUID: uuid, Major: 1, Minor: 4, DataOff: dataOff, NPFNs: (uint64(size) - dataOff) / 4096,
		Mode: ModeRAM, Align: Align, PageSize: 4096, PageSt: 64}, nil
}

// Marshal encodes the block with its checksum.
func (in *Info) Marshal() []byte {
	b := make([]byte, InfoSize)
	le := binary.LittleEndian
	copy(b[0:], signature)
	copy(b[16:], in.UUID[:])
	copy(b[32:], in.Parent[:])
	le.PutUint16(b[52:], in.Major)
	le.PutUint16(b[54:], in.Minor)
	le.PutUint64(b[56:], in.DataOff)
	le.PutUint64(b[64:], in.NPFNs)
	le.PutUint32(b[72:], in.Mode)
	le.PutUint32(b[80:], in.EndTrunc)
	le.PutUint32(b[84:], in.Align)
	le.PutUint32(b[88:], in.PageSize)
	le.PutUint16(b[92:], in.PageSt)
	le.PutUint64(b[4088:], fletcher64(b))
	return b
}

// fletcher64 is nd_fletcher64 over the block with the checksum field zero.
func fletcher64(b []byte) uint64 {
	var lo uint32
	var hi uint64
	for i := 0; i+4 <= len(b); i += 4 {
		w := binary.LittleEndian.Uint32(b[i:])
		if i == 4088 || i == 4092 {
			w = 0
		}
		lo += w
		hi += uint64(lo)
	}
	return hi<<32 | uint64(lo)
}

// Errors of Parse.
var (
	ErrNoInfo   = errors.New("no PFN info block (not an fsdax namespace image)")
	ErrChecksum = errors.New("PFN info block checksum mismatch")
)

// Parse decodes and checks a PFN info block (the 4 KiB at InfoOffset) as
// nd_pfn_validate does, for a namespace of size bytes.
func Parse(b []byte, size int64) (*Info, error) {
	if len(b) < InfoSize {
		return nil, fmt.Errorf("pmem: info block is %d bytes, want %d", len(b), InfoSize)
	}
	b = b[:InfoSize]
	if !bytes.Equal(b[:16], []byte(signature)) {
		return nil, ErrNoInfo
	}
	le := binary.LittleEndian
	if le.Uint64(b[4088:]) != fletcher64(b) {
		return nil, ErrChecksum
	}
	in := &Info{Major: le.Uint16(b[52:]), Minor: le.Uint16(b[54:]), DataOff: le.Uint64(b[56:]),
		NPFNs: le.Uint64(b[64:]), Mode: le.Uint32(b[72:]), EndTrunc: le.Uint32(b[80:]),
		Align: le.Uint32(b[84:]), PageSize: le.Uint32(b[88:]), PageSt: le.Uint16(b[92:])}
	copy(in.UUID[:], b[16:])
	copy(in.Parent[:], b[32:])
	switch {
	case in.Major != 1:
		return nil, fmt.Errorf("pmem: PFN info version %d.%d, want 1.x", in.Major, in.Minor)
	case in.Mode != 1 && in.Mode != 2:
		return nil, fmt.Errorf("pmem: PFN info mode %d, want 1 (ram) or 2 (pmem)", in.Mode)
	case in.DataOff == 0 || in.DataOff%4096 != 0 || (in.Align != 0 && in.DataOff%uint64(in.Align) != 0):
		return nil, fmt.Errorf("pmem: PFN info data offset %#x is not aligned", in.DataOff)
	case size > 0 && in.DataOff >= uint64(size):
		return nil, fmt.Errorf("pmem: PFN info data offset %#x is beyond the namespace (%d bytes)", in.DataOff, size)
	case size > 0 && in.NPFNs*4096 > uint64(size)-in.DataOff:
		return nil, fmt.Errorf("pmem: PFN info claims %d pages, the namespace holds %d after the metadata", in.NPFNs, (uint64(size)-in.DataOff)/4096)
	}
	return in, nil
}
