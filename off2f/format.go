package off2f

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// Version is the format version of both the note and the text file header.
const Version = 1

// Machine is the instruction set a program is built for, recorded in the
// note and in the text header: a loader maps only its own machine's text,
// and a text store holds one machine's texts. x86-64 is 0, the value those
// bytes have always held, so an x86-64 program's files and text hash are
// the same with and without the field.
type Machine uint16

// The machines OFF2F converts, named by their GOARCH.
const (
	MachineAMD64 Machine = 0 // x86-64 (EM_X86_64)
	MachineARM64 Machine = 1 // aarch64 (EM_AARCH64)
)

var machines = []struct {
	m      Machine
	elf    elf.Machine
	name   string
	goarch string
}{
	{MachineAMD64, elf.EM_X86_64, "x86-64", "amd64"},
	{MachineARM64, elf.EM_AARCH64, "aarch64", "arm64"},
}

// String is the machine's usual name ("x86-64", "aarch64"), as the loader
// prints it.
func (m Machine) String() string {
	for _, k := range machines {
		if k.m == m {
			return k.name
		}
	}
	return fmt.Sprintf("machine %d", uint16(m))
}

// GOARCH is the Go architecture that builds programs for m ("" if unknown).
func (m Machine) GOARCH() string {
	for _, k := range machines {
		if k.m == m {
			return k.goarch
		}
	}
	return ""
}

// ELF is m's ELF e_machine (EM_NONE if unknown).
func (m Machine) ELF() elf.Machine {
	for _, k := range machines {
		if k.m == m {
			return k.elf
		}
	}
	return elf.EM_NONE
}

func (m Machine) known() bool { return m.ELF() != elf.EM_NONE }

// MachineOfELF is the Machine of an ELF e_machine; ok is false for one
// OFF2F does not convert.
func MachineOfELF(em elf.Machine) (m Machine, ok bool) {
	for _, k := range machines {
		if k.elf == em {
			return k.m, true
		}
	}
	return 0, false
}

// MachineOfGOARCH is the Machine of a GOARCH ("amd64", "arm64"); ok is
// false for one OFF2F does not convert.
func MachineOfGOARCH(goarch string) (m Machine, ok bool) {
	for _, k := range machines {
		if k.goarch == goarch {
			return k.m, true
		}
	}
	return 0, false
}

// Limits. They bound what the loader must handle, so a corrupt file cannot make
// it loop or index out of range.
const (
	MaxSegments = 16
	PathMax     = 128 // store and fallback directory fields, NUL-terminated
	DeviceMax   = 64
	FSTypeMax   = 16
	OptionsMax  = 48

	PageSize     = 4096
	HugePageSize = 2 << 20
	// HugeMin is the size from which a read-only segment is placed at a text-file
	// offset congruent to its vaddr modulo 2 MiB, so DAX can map it with PMD entries.
	HugeMin = HugePageSize

	// TextHeaderSize is the size of the text file's header page.
	TextHeaderSize = PageSize
)

// Note flags.
const (
	FlagPrefault = 1 << 0 // map text with MAP_POPULATE
	FlagHuge     = 1 << 1 // at least one segment is 2 MiB-aligned in the text file
	FlagDyn      = 1 << 2 // the program is ET_DYN (static-pie)
	// FlagCRC: the note ends with the text's CRC-32C (NoteCRCSize bytes),
	// and the loader checks the whole text against it before it runs the
	// program (Options.CRC; nvboot gives it to PID 1 alone).
	FlagCRC = 1 << 3
	// FlagHugeSpan: the loader maps every read-only segment from the 2 MiB
	// boundary at or below it to the one at or above its end (Segment.span),
	// so that DAX maps all of it with 2 MiB entries. The text file holds
	// filler bytes there (spanFill), each read-only segment at an offset
	// congruent to its vaddr modulo 2 MiB, and the program leaves those
	// addresses free: Convert sets it for x86-64 ET_EXEC programs whose
	// segments start on 2 MiB boundaries (Go's -ldflags=-R=0x200000).
	FlagHugeSpan = 1 << 4
	knownFlags   = FlagPrefault | FlagHuge | FlagDyn | FlagCRC | FlagHugeSpan
	// textFlags are the flags a text header may carry.
	textFlags = FlagHuge | FlagHugeSpan
)

// Segment protections, as in mmap(2).
const (
	ProtRead  = 1
	ProtWrite = 2
	ProtExec  = 4
)

// NoteName is the ELF note name of the OFF2F note; NoteType its type.
const (
	NoteName = "OFF2F"
	NoteType = 1
)

// TextMagic opens every text file.
var TextMagic = [8]byte{'O', 'F', 'F', '2', 'F', 'T', 'X', 'T'}

// Segment describes one read-only segment. Encoded as 40 bytes:
//
//	0  u64 vaddr   link-time virtual address (add the load bias for ET_DYN)
//	8  u64 memsz   bytes mapped; the text file holds all memsz bytes
//	16 u64 filesz  bytes that came from the input file (the rest were zero)
//	24 u64 offset  offset of the segment in the text file
//	32 u32 prot    ProtRead|ProtExec
//	36 u32 reserved, must be zero
type Segment struct {
	Vaddr, Memsz, Filesz, Offset uint64
	Prot                         uint32
}

// SegmentSize is the encoded size of a Segment.
const SegmentSize = 40

// Note is the descriptor of the OFF2F note in the header file. Encoded as
// NoteFixedSize bytes followed by Nseg segments:
//
//	0   u16 version
//	2   u16 machine (Machine: 0 x86-64, 1 aarch64)
//	4   u32 flags
//	8   [32] SHA-256 content hash of the text (see TextHash)
//	40  u64 size of the text file in bytes
//	48  u32 number of segments
//	52  u32 number of program headers of the original program
//	56  u64 vaddr of the original program header table (inside a text segment)
//	64  [128] text store directory, NUL-terminated ("/nv/text")
//	192 [128] fallback directory, NUL-terminated, may be empty
//	320 [64]  store device to mount when it is not mounted, may be empty
//	384 [16]  its filesystem type
//	400 [48]  its mount options
//	448 segments
//
// then, with FlagCRC only (NoteCRCSize bytes):
//
//	0 u32 CRC-32C (Castagnoli) of the memsz bytes of every segment, in
//	      order (TextCRC): what the loader computes over the mapped text
//	4 u32 reserved, must be zero
//
// The trailer, behind a flag a loader that does not know it refuses,
// leaves every note without it byte for byte as before.
type Note struct {
	Version     uint16
	Machine     Machine
	Flags       uint32
	Hash        [32]byte
	TextSize    uint64
	OrigPhnum   uint32
	OrigPhdr    uint64
	StoreDir    string
	FallbackDir string
	Device      string
	FSType      string
	Options     string
	Segments    []Segment
	CRC         uint32 // with FlagCRC: TextCRC of the text; zero without
}

// NoteFixedSize is the encoded size of a Note without its segments.
const NoteFixedSize = 448

// NoteCRCSize is the size of the trailer FlagCRC adds to the note.
const NoteCRCSize = 8

// encodedSize is the size of the note's encoding with nseg segments.
func (n *Note) encodedSize(nseg int) int {
	size := NoteFixedSize + nseg*SegmentSize
	if n.Flags&FlagCRC != 0 {
		size += NoteCRCSize
	}
	return size
}

// TextHeader is the header page of a text file:
//
//	0  [8] magic "OFF2FTXT"
//	8  u16 version
//	10 u16 machine (as in the note)
//	12 u32 flags (FlagHuge, FlagHugeSpan)
//	16 [32] SHA-256 content hash
//	48 u64 size of the whole text file
//	56 u32 number of segments
//	60 u32 header size (4096)
//	64 u64 vaddr of the original program header table (as in the note)
//	72 u32 number of original program headers (as in the note)
//	76 u32 reserved, must be zero
//	80 segments, then zeros up to 4096
//
// The original program header fields are here too (and in the hash) so that the
// loader's comparison of this page with the note also vouches for them: the
// loader hands them to the program as AT_PHDR and AT_PHNUM.
type TextHeader struct {
	Version   uint16
	Machine   Machine
	Flags     uint32
	Hash      [32]byte
	Size      uint64
	OrigPhdr  uint64
	OrigPhnum uint32
	Segments  []Segment
}

// TextHeaderFixedSize is the encoded size of a TextHeader without its segments.
const TextHeaderFixedSize = 80

// HashName is the name of a text file in the store: the hex content hash.
func HashName(h [32]byte) string { return hex.EncodeToString(h[:]) }

var le = binary.LittleEndian

func putSegments(b []byte, segs []Segment) {
	for i, s := range segs {
		p := b[i*SegmentSize:]
		le.PutUint64(p[0:], s.Vaddr)
		le.PutUint64(p[8:], s.Memsz)
		le.PutUint64(p[16:], s.Filesz)
		le.PutUint64(p[24:], s.Offset)
		le.PutUint32(p[32:], s.Prot)
		le.PutUint32(p[36:], 0)
	}
}

func getSegments(b []byte, n int) ([]Segment, error) {
	segs := make([]Segment, n)
	for i := range segs {
		p := b[i*SegmentSize:]
		segs[i] = Segment{
			Vaddr:  le.Uint64(p[0:]),
			Memsz:  le.Uint64(p[8:]),
			Filesz: le.Uint64(p[16:]),
			Offset: le.Uint64(p[24:]),
			Prot:   le.Uint32(p[32:]),
		}
		if le.Uint32(p[36:]) != 0 {
			return nil, fmt.Errorf("segment %d: reserved field is not zero", i)
		}
	}
	return segs, nil
}

func putString(b []byte, s, field string) error {
	if len(s) >= len(b) {
		return fmt.Errorf("%s %q is too long (at most %d bytes)", field, s, len(b)-1)
	}
	if bytes.IndexByte([]byte(s), 0) >= 0 {
		return fmt.Errorf("%s %q contains a NUL byte", field, s)
	}
	copy(b, s)
	return nil
}

func getString(b []byte, field string) (string, error) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", fmt.Errorf("%s is not NUL-terminated", field)
	}
	for _, c := range b[i:] {
		if c != 0 {
			return "", fmt.Errorf("%s has bytes after its terminating NUL", field)
		}
	}
	return string(b[:i]), nil
}

// MarshalBinary encodes the note descriptor.
func (n *Note) MarshalBinary() ([]byte, error) {
	if len(n.Segments) == 0 || len(n.Segments) > MaxSegments {
		return nil, fmt.Errorf("note: %d segments (want 1..%d)", len(n.Segments), MaxSegments)
	}
	if n.Flags&FlagCRC == 0 && n.CRC != 0 {
		return nil, fmt.Errorf("note: a CRC (0x%08x) without FlagCRC", n.CRC)
	}
	b := make([]byte, n.encodedSize(len(n.Segments)))
	le.PutUint16(b[0:], n.Version)
	le.PutUint16(b[2:], uint16(n.Machine))
	le.PutUint32(b[4:], n.Flags)
	copy(b[8:40], n.Hash[:])
	le.PutUint64(b[40:], n.TextSize)
	le.PutUint32(b[48:], uint32(len(n.Segments)))
	le.PutUint32(b[52:], n.OrigPhnum)
	le.PutUint64(b[56:], n.OrigPhdr)
	for _, f := range []struct {
		off, size int
		val, name string
	}{
		{64, PathMax, n.StoreDir, "store directory"},
		{192, PathMax, n.FallbackDir, "fallback directory"},
		{320, DeviceMax, n.Device, "store device"},
		{384, FSTypeMax, n.FSType, "store filesystem type"},
		{400, OptionsMax, n.Options, "store mount options"},
	} {
		if err := putString(b[f.off:f.off+f.size], f.val, f.name); err != nil {
			return nil, err
		}
	}
	putSegments(b[NoteFixedSize:], n.Segments)
	if n.Flags&FlagCRC != 0 {
		le.PutUint32(b[NoteFixedSize+len(n.Segments)*SegmentSize:], n.CRC)
	}
	return b, nil
}

// ErrFormat marks every decoding error: the input is not a valid OFF2F file.
var ErrFormat = errors.New("not a valid OFF2F file")

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
}

// UnmarshalBinary decodes and checks a note descriptor. It rejects everything the
// loader would reject, so inspect and verify agree with it.
func (n *Note) UnmarshalBinary(b []byte) error {
	if len(b) < NoteFixedSize {
		return formatErr("note is %d bytes, want at least %d", len(b), NoteFixedSize)
	}
	v := Note{
		Version:   le.Uint16(b[0:]),
		Machine:   Machine(le.Uint16(b[2:])),
		Flags:     le.Uint32(b[4:]),
		TextSize:  le.Uint64(b[40:]),
		OrigPhnum: le.Uint32(b[52:]),
		OrigPhdr:  le.Uint64(b[56:]),
	}
	copy(v.Hash[:], b[8:40])
	if v.Version != Version {
		return formatErr("note version %d, this tool reads version %d", v.Version, Version)
	}
	if !v.Machine.known() {
		return formatErr("note names %v, which this tool does not know", v.Machine)
	}
	if v.Flags&^knownFlags != 0 {
		return formatErr("note has unknown flags %#x", v.Flags&^knownFlags)
	}
	nseg := le.Uint32(b[48:])
	if nseg == 0 || nseg > MaxSegments {
		return formatErr("note has %d segments (want 1..%d)", nseg, MaxSegments)
	}
	if want := v.encodedSize(int(nseg)); len(b) != want {
		crc := ""
		if v.Flags&FlagCRC != 0 {
			crc = " and a CRC"
		}
		return formatErr("note is %d bytes, want %d for %d segments%s", len(b), want, nseg, crc)
	}
	if v.Flags&FlagCRC != 0 {
		t := b[NoteFixedSize+int(nseg)*SegmentSize:]
		if le.Uint32(t[4:]) != 0 {
			return formatErr("note: reserved field after the CRC is not zero")
		}
		v.CRC = le.Uint32(t)
	}
	var err error
	for _, f := range []struct {
		off, size int
		dst       *string
		name      string
	}{
		{64, PathMax, &v.StoreDir, "store directory"},
		{192, PathMax, &v.FallbackDir, "fallback directory"},
		{320, DeviceMax, &v.Device, "store device"},
		{384, FSTypeMax, &v.FSType, "store filesystem type"},
		{400, OptionsMax, &v.Options, "store mount options"},
	} {
		if *f.dst, err = getString(b[f.off:f.off+f.size], f.name); err != nil {
			return formatErr("note: %v", err)
		}
	}
	if v.StoreDir == "" || v.StoreDir[0] != '/' {
		return formatErr("note: store directory %q is not an absolute path", v.StoreDir)
	}
	if v.FallbackDir != "" && v.FallbackDir[0] != '/' {
		return formatErr("note: fallback directory %q is not an absolute path", v.FallbackDir)
	}
	if v.Segments, err = getSegments(b[NoteFixedSize:], int(nseg)); err != nil {
		return formatErr("note: %v", err)
	}
	if err := checkSegments(v.Segments, v.TextSize, v.Flags); err != nil {
		return formatErr("note: %v", err)
	}
	if err := checkOrigPhdr(v.Segments, v.OrigPhdr, v.OrigPhnum); err != nil {
		return formatErr("note: %v", err)
	}
	*n = v
	return nil
}

// MaxOrigPhnum bounds the original program's program header count.
const MaxOrigPhnum = 256

func checkOrigPhdr(segs []Segment, vaddr uint64, n uint32) error {
	if n == 0 || n > MaxOrigPhnum {
		return fmt.Errorf("original program has %d program headers (want 1..%d)", n, MaxOrigPhnum)
	}
	if vaddr%8 != 0 || !inSegments(segs, vaddr, uint64(n)*56) {
		return fmt.Errorf("original program headers at %#x are not inside a text segment", vaddr)
	}
	return nil
}

func inSegments(segs []Segment, addr, size uint64) bool {
	for _, s := range segs {
		if addr >= s.Vaddr && size <= s.Memsz && addr-s.Vaddr <= s.Memsz-size {
			return true
		}
	}
	return false
}

// userTop bounds vaddrs: x86-64 user space with 4-level paging ends at 2^47,
// aarch64's with 48-bit addresses at 2^48; one bound holds for both.
const userTop = 1 << 47

// span is where the loader maps segment s under a note's flags: from
// start for size bytes, from the text file's offset s.Offset-lead. A
// read-only segment of a FlagHugeSpan text spans whole 2 MiB pages, any
// other segment whole 4 KiB pages. lead is the link-time vaddr modulo that
// page size, so the span is the same relative to a load bias (which is
// page-aligned, and 2 MiB-aligned where the kernel honours the header
// file's alignment). huge says the span is of 2 MiB pages.
func (s Segment) span(flags uint32) (start, size, lead uint64, huge bool) {
	align := uint64(PageSize)
	if huge = flags&FlagHugeSpan != 0 && s.Prot&ProtWrite == 0; huge {
		align = HugePageSize
	}
	lead = s.Vaddr % align
	end := (s.Vaddr + s.Memsz + align - 1) &^ (align - 1)
	return s.Vaddr - lead, end - (s.Vaddr - lead), lead, huge
}

// checkSegments enforces what the loader relies on: page congruence between vaddr
// and offset, segments inside the text file after its header page, ascending and
// non-overlapping in both memory and file, read-only protections except for a
// last data segment: the initial image of the writable data (rw-, page-aligned,
// no bss), which the loader maps copy-on-write over the header file's bss.
// With FlagHugeSpan each read-only segment's 2 MiB span must lie so too:
// vaddr and offset congruent modulo 2 MiB, the span's file range after the
// header page and inside the file, the spans apart from each other and
// from the data in memory and in the file.
func checkSegments(segs []Segment, textSize uint64, flags uint32) error {
	var prevEnd, prevFileEnd uint64
	for i, s := range segs {
		switch {
		case s.Memsz == 0:
			return fmt.Errorf("segment %d is empty", i)
		case s.Filesz > s.Memsz:
			return fmt.Errorf("segment %d: filesz %#x > memsz %#x", i, s.Filesz, s.Memsz)
		case s.Prot == ProtRead|ProtWrite && (i != len(segs)-1 || s.Vaddr%PageSize != 0 || s.Filesz != s.Memsz):
			return fmt.Errorf("segment %d: a data segment (rw-) must be the last, page-aligned, with no bss", i)
		case s.Prot != ProtRead|ProtWrite && (s.Prot&^(ProtRead|ProtExec) != 0 || s.Prot&ProtRead == 0):
			return fmt.Errorf("segment %d: protection %#x is neither read-only (r or r-x) nor data (rw-)", i, s.Prot)
		case s.Vaddr >= userTop || s.Memsz >= userTop || s.Vaddr+s.Memsz > userTop:
			return fmt.Errorf("segment %d: [%#x, +%#x) is outside user space", i, s.Vaddr, s.Memsz)
		case s.Vaddr%PageSize != s.Offset%PageSize:
			return fmt.Errorf("segment %d: vaddr %#x and offset %#x differ modulo the page size", i, s.Vaddr, s.Offset)
		case s.Offset < TextHeaderSize:
			return fmt.Errorf("segment %d: offset %#x overlaps the header page", i, s.Offset)
		case s.Offset > textSize || s.Memsz > textSize-s.Offset:
			return fmt.Errorf("segment %d: [%#x, +%#x) runs past the end of the %d-byte text file", i, s.Offset, s.Memsz, textSize)
		}
		start, size, lead, huge := s.span(flags)
		fileStart, fileEnd := s.Offset, s.Offset+s.Memsz
		if huge {
			if s.Vaddr%HugePageSize != s.Offset%HugePageSize {
				return fmt.Errorf("segment %d: vaddr %#x and offset %#x differ modulo 2 MiB, which its 2 MiB span needs", i, s.Vaddr, s.Offset)
			}
			fileStart, fileEnd = s.Offset-lead, s.Offset-lead+size
			if fileStart < TextHeaderSize {
				return fmt.Errorf("segment %d: its 2 MiB span at offset %#x overlaps the header page", i, fileStart)
			}
			if size-lead > textSize-s.Offset {
				return fmt.Errorf("segment %d: its 2 MiB span [%#x, +%#x) runs past the end of the %d-byte text file", i, fileStart, size, textSize)
			}
		}
		switch {
		case i > 0 && start < prevEnd:
			return fmt.Errorf("segment %d at %#x overlaps or precedes segment %d", i, s.Vaddr, i-1)
		case i > 0 && fileStart < prevFileEnd:
			return fmt.Errorf("segment %d at offset %#x overlaps segment %d in the text file", i, s.Offset, i-1)
		}
		prevEnd, prevFileEnd = start+size, fileEnd
	}
	return nil
}

func pageDown(x uint64) uint64 { return x &^ (PageSize - 1) }
func pageUp(x uint64) uint64   { return (x + PageSize - 1) &^ (PageSize - 1) }

// MarshalBinary encodes the text header page (TextHeaderSize bytes).
func (t *TextHeader) MarshalBinary() ([]byte, error) {
	if len(t.Segments) == 0 || len(t.Segments) > MaxSegments {
		return nil, fmt.Errorf("text header: %d segments (want 1..%d)", len(t.Segments), MaxSegments)
	}
	b := make([]byte, TextHeaderSize)
	copy(b[0:8], TextMagic[:])
	le.PutUint16(b[8:], t.Version)
	le.PutUint16(b[10:], uint16(t.Machine))
	le.PutUint32(b[12:], t.Flags)
	copy(b[16:48], t.Hash[:])
	le.PutUint64(b[48:], t.Size)
	le.PutUint32(b[56:], uint32(len(t.Segments)))
	le.PutUint32(b[60:], TextHeaderSize)
	le.PutUint64(b[64:], t.OrigPhdr)
	le.PutUint32(b[72:], t.OrigPhnum)
	putSegments(b[TextHeaderFixedSize:], t.Segments)
	return b, nil
}

// UnmarshalBinary decodes and checks a text header page. fileSize is the size of
// the text file it came from.
func (t *TextHeader) UnmarshalBinary(b []byte) error {
	if len(b) < TextHeaderSize {
		return formatErr("text file is %d bytes, shorter than its %d-byte header page", len(b), TextHeaderSize)
	}
	if !bytes.Equal(b[0:8], TextMagic[:]) {
		return formatErr("text file magic is %q, want %q", b[0:8], TextMagic[:])
	}
	v := TextHeader{Version: le.Uint16(b[8:]), Machine: Machine(le.Uint16(b[10:])), Flags: le.Uint32(b[12:]), Size: le.Uint64(b[48:]),
		OrigPhdr: le.Uint64(b[64:]), OrigPhnum: le.Uint32(b[72:])}
	if le.Uint32(b[76:]) != 0 {
		return formatErr("text file header: reserved field is not zero")
	}
	copy(v.Hash[:], b[16:48])
	if v.Version != Version {
		return formatErr("text file version %d, this tool reads version %d", v.Version, Version)
	}
	if !v.Machine.known() {
		return formatErr("text file names %v, which this tool does not know", v.Machine)
	}
	if v.Flags&^textFlags != 0 {
		return formatErr("text file has unknown flags %#x", v.Flags&^textFlags)
	}
	if hs := le.Uint32(b[60:]); hs != TextHeaderSize {
		return formatErr("text file header size %d, want %d", hs, TextHeaderSize)
	}
	nseg := le.Uint32(b[56:])
	if nseg == 0 || nseg > MaxSegments {
		return formatErr("text file has %d segments (want 1..%d)", nseg, MaxSegments)
	}
	end := TextHeaderFixedSize + int(nseg)*SegmentSize
	for _, c := range b[end:TextHeaderSize] {
		if c != 0 {
			return formatErr("text file header page has bytes after its segment table")
		}
	}
	var err error
	if v.Segments, err = getSegments(b[TextHeaderFixedSize:], int(nseg)); err != nil {
		return formatErr("text file: %v", err)
	}
	if err := checkSegments(v.Segments, v.Size, v.Flags); err != nil {
		return formatErr("text file: %v", err)
	}
	if err := checkOrigPhdr(v.Segments, v.OrigPhdr, v.OrigPhnum); err != nil {
		return formatErr("text file: %v", err)
	}
	*t = v
	return nil
}
