package off2f

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"hash/crc32"
)

// TextHash is the content hash that names a text file: SHA-256 over the original
// program header fields (u64 vaddr, u32 count), the machine (u16), the
// text's FlagHugeSpan bit (u16: zero for every other text), the encoded
// segment table, then the memsz bytes of every segment.
// The table and the machine are part of the hash so that the same bytes at
// other addresses, or for another machine, are a different text; the flag,
// so that a text laid out with 2 MiB spans (its filler, its size) is too.
func TextHash(m Machine, flags uint32, origPhdr uint64, origPhnum uint32, segs []Segment, contents [][]byte) [32]byte {
	h := NewTextHash(m, flags, origPhdr, origPhnum, segs)
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
func NewTextHash(m Machine, flags uint32, origPhdr uint64, origPhnum uint32, segs []Segment) hash.Hash {
	h := sha256.New()
	var ph [16]byte
	le.PutUint64(ph[0:], origPhdr)
	le.PutUint32(ph[8:], origPhnum)
	le.PutUint16(ph[12:], uint16(m))
	le.PutUint16(ph[14:], uint16(flags&FlagHugeSpan))
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
// long (so DAX can use PMD mappings), else modulo the page size. With
// spans (FlagHugeSpan) every read-only segment's whole 2 MiB span
// (Segment.span) gets the file range congruent to it after the previous
// one. It returns the segments with offsets, the file size (page-aligned)
// and whether any was huge.
func layoutText(segs []Segment, spans bool) ([]Segment, uint64, bool) {
	var flags uint32
	if spans {
		flags = FlagHugeSpan
	}
	out := make([]Segment, len(segs))
	cursor := uint64(TextHeaderSize)
	huge := false
	for i, s := range segs {
		if _, size, lead, ok := s.span(flags); ok {
			start := (cursor + HugePageSize - 1) &^ (HugePageSize - 1)
			s.Offset, huge = start+lead, true
			out[i] = s
			cursor = start + size
			continue
		}
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

// spanFill fills a 2 MiB span around its segment: x86-64's int3, so a jump
// there traps, and not zero, because a zero block in a file is a hole
// once copied into ext4 (mke2fs -d, cp --sparse), and DAX maps a 2 MiB
// range with one entry only when all of it is allocated.
const spanFill = 0xcc

// buildText assembles the whole text file: header page, then each segment's bytes
// at its offset. Gaps are zero (sparse once written to a filesystem), but
// for the filler of 2 MiB spans when spans is set.
func buildText(m Machine, origPhdr uint64, origPhnum uint32, segs []Segment, contents [][]byte, spans bool) (*TextHeader, []byte, error) {
	segs, size, huge := layoutText(segs, spans)
	th := &TextHeader{Version: Version, Machine: m, Size: size, OrigPhdr: origPhdr, OrigPhnum: origPhnum, Segments: segs}
	if huge {
		th.Flags |= FlagHuge
	}
	if spans {
		th.Flags |= FlagHugeSpan
	}
	th.Hash = TextHash(m, th.Flags, origPhdr, origPhnum, segs, contents)
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
		if _, n, lead, ok := s.span(th.Flags); ok {
			fill := body[s.Offset-lead : s.Offset-lead+n]
			for j := range fill {
				fill[j] = spanFill
			}
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
	if got := TextHash(th.Machine, th.Flags, th.OrigPhdr, th.OrigPhnum, th.Segments, segmentBytes(b, th.Segments)); got != th.Hash {
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
