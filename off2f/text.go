package off2f

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"hash/crc32"
)

// TextHash is the content hash that names a text file: SHA-256 over the original
// program header fields (u64 vaddr, u32 count), the machine (u16, then u16
// zero), the encoded segment table, then the memsz bytes of every segment.
// The table and the machine are part of the hash so that the same bytes at
// other addresses, or for another machine, are a different text.
func TextHash(m Machine, origPhdr uint64, origPhnum uint32, segs []Segment, contents [][]byte) [32]byte {
	h := NewTextHash(m, origPhdr, origPhnum, segs)
	for _, c := range contents {
		h.Write(c)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// NewTextHash is TextHash as a running hash, for a text checked as it
// streams rather than held whole: write the memsz bytes of every segment,
// in order, then Sum.
func NewTextHash(m Machine, origPhdr uint64, origPhnum uint32, segs []Segment) hash.Hash {
	h := sha256.New()
	var ph [16]byte
	le.PutUint64(ph[0:], origPhdr)
	le.PutUint32(ph[8:], origPhnum)
	le.PutUint16(ph[12:], uint16(m))
	h.Write(ph[:])
	table := make([]byte, len(segs)*SegmentSize)
	putSegments(table, segs)
	h.Write(table)
	return h
}

// castagnoli is CRC-32C's table: the polynomial the loader's CPU
// instructions compute (SSE4.2 crc32 on x86-64, CRC32C* on aarch64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// TextCRC is the CRC-32C of a text's segments, what a note with FlagCRC
// records: the memsz bytes of every segment, in order, as one stream (the
// header page and the padding between segments left out, as the loader
// reads the text through its mappings).
func TextCRC(contents [][]byte) uint32 {
	var c uint32
	for _, b := range contents {
		c = crc32.Update(c, castagnoli, b)
	}
	return c
}

// CheckCRC checks the whole text file text against the CRC a note with
// FlagCRC records, as the loader does; nil for a note without one.
func (n *Note) CheckCRC(text []byte) error {
	if n.Flags&FlagCRC == 0 {
		return nil
	}
	for i, s := range n.Segments {
		if s.Offset > uint64(len(text)) || s.Memsz > uint64(len(text))-s.Offset {
			return fmt.Errorf("segment %d runs past the end of the %d-byte text", i, len(text))
		}
	}
	if got := TextCRC(segmentBytes(text, n.Segments)); got != n.CRC {
		return fmt.Errorf("CRC-32C of the text's segments is 0x%08x, the note's 0x%08x", got, n.CRC)
	}
	return nil
}

// layoutText assigns text-file offsets: after the header page, each segment at the
// first offset congruent to its vaddr modulo 2 MiB when it is at least HugeMin
// long (so DAX can use PMD mappings), else modulo the page size. It returns the
// segments with offsets, the file size (page-aligned) and whether any was huge.
func layoutText(segs []Segment) ([]Segment, uint64, bool) {
	out := make([]Segment, len(segs))
	cursor := uint64(TextHeaderSize)
	huge := false
	for i, s := range segs {
		align := uint64(PageSize)
		if s.Memsz >= HugeMin {
			align, huge = HugePageSize, true
		}
		off := cursor - cursor%align + s.Vaddr%align
		if off < cursor {
			off += align
		}
		s.Offset = off
		out[i] = s
		cursor = off + s.Memsz
	}
	return out, pageUp(cursor), huge
}

// buildText assembles the whole text file: header page, then each segment's bytes
// at its offset. Gaps are zero (sparse once written to a filesystem).
func buildText(m Machine, origPhdr uint64, origPhnum uint32, segs []Segment, contents [][]byte) (*TextHeader, []byte, error) {
	segs, size, huge := layoutText(segs)
	th := &TextHeader{Version: Version, Machine: m, Hash: TextHash(m, origPhdr, origPhnum, segs, contents), Size: size,
		OrigPhdr: origPhdr, OrigPhnum: origPhnum, Segments: segs}
	if huge {
		th.Flags |= FlagHuge
	}
	hdr, err := th.MarshalBinary()
	if err != nil {
		return nil, nil, err
	}
	body := make([]byte, size)
	copy(body, hdr)
	for i, s := range segs {
		if uint64(len(contents[i])) != s.Memsz {
			return nil, nil, fmt.Errorf("segment %d: have %d bytes, want %d", i, len(contents[i]), s.Memsz)
		}
		copy(body[s.Offset:], contents[i])
	}
	return th, body, nil
}

// ParseText decodes a whole text file and checks its hash. It is the full check
// that `off2f verify` runs; the loader checks the header page, and a
// FlagCRC text's CRC.
func ParseText(b []byte) (*TextHeader, error) {
	var th TextHeader
	if err := th.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	if th.Size != uint64(len(b)) {
		return nil, formatErr("text file is %d bytes, its header says %d", len(b), th.Size)
	}
	if got := TextHash(th.Machine, th.OrigPhdr, th.OrigPhnum, th.Segments, segmentBytes(b, th.Segments)); got != th.Hash {
		return nil, formatErr("text content hash %s does not match the header's %s", HashName(got), HashName(th.Hash))
	}
	return &th, nil
}

func segmentBytes(text []byte, segs []Segment) [][]byte {
	out := make([][]byte, len(segs))
	for i, s := range segs {
		out[i] = text[s.Offset : s.Offset+s.Memsz]
	}
	return out
}
