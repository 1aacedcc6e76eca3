package off2f

import (
	"fmt"
	"math"
)

// The hashed form of a text is the bytes TextHash is taken over, in order:
//
//	offset  size       field
//	0       8          OrigPhdr (u64)
//	8       4          OrigPhnum (u32)
//	12      2          Machine (u16)
//	14      2          the FlagHugeSpan bit (u16: zero for every
//	                   other text), which lays the file out
//	16      40*nseg    the segment table as the text file encodes it
//	                   (Vaddr, Memsz, Filesz, Offset, Prot, zero)
//	...     Σ Memsz    the bytes of every segment, in table order
//
// Its SHA-256 is the text's name in the store. That makes it what an OCI
// blob of the text holds (nvboot push): a registry's digest is the store's
// name, and the check of a blob as it downloads is the store's own check.
// It is also smaller than the text file: no header page, no padding
// between segments. The file is made back from it byte for byte
// (TextFromHashed), given the number of segments, which the form does not
// record (the hash does not cover it; the note of every program using the
// text does).
const hashedPrefixSize = 16

// HashedText returns the hashed form of the text file text (checked whole
// first, as ParseText does) and its number of segments.
func HashedText(text []byte) (hashed []byte, nseg int, err error) {
	th, err := ParseText(text)
	if err != nil {
		return nil, 0, err
	}
	n := hashedPrefixSize + len(th.Segments)*SegmentSize
	for _, s := range th.Segments {
		n += int(s.Memsz)
	}
	out := make([]byte, hashedPrefixSize+len(th.Segments)*SegmentSize, n)
	le.PutUint64(out[0:], th.OrigPhdr)
	le.PutUint32(out[8:], th.OrigPhnum)
	le.PutUint16(out[12:], uint16(th.Machine))
	le.PutUint16(out[14:], uint16(th.Flags&FlagHugeSpan))
	putSegments(out[hashedPrefixSize:], th.Segments)
	for _, c := range segmentBytes(text, th.Segments) {
		out = append(out, c...)
	}
	return out, len(th.Segments), nil
}

// TextFromHashed makes the text file back from its hashed form h holding
// nseg segments: the header page, then each segment at its offset. The
// offsets h records must be the ones the text layout gives (a text file
// made any other way is not one Convert writes), and the header page must
// pass every check the loader's reader makes. The result's content hash is
// the SHA-256 of h, and it is the file Convert wrote, byte for byte.
func TextFromHashed(h []byte, nseg int) ([]byte, error) {
	if nseg < 1 || nseg > MaxSegments {
		return nil, formatErr("hashed text: %d segments (want 1..%d)", nseg, MaxSegments)
	}
	fixed := hashedPrefixSize + nseg*SegmentSize
	if len(h) < fixed {
		return nil, formatErr("hashed text: %d bytes, shorter than its %d-byte table of %d segments", len(h), fixed, nseg)
	}
	origPhdr, phnum, m := le.Uint64(h[0:]), le.Uint32(h[8:]), Machine(le.Uint16(h[12:]))
	spanBits := uint32(le.Uint16(h[14:]))
	if spanBits&^FlagHugeSpan != 0 {
		return nil, formatErr("hashed text: flags %#x, only FlagHugeSpan (%#x) is known there", spanBits, FlagHugeSpan)
	}
	spans := spanBits != 0
	if !m.known() {
		return nil, formatErr("hashed text names %v, which this tool does not know", m)
	}
	segs, err := getSegments(h[hashedPrefixSize:], nseg)
	if err != nil {
		return nil, formatErr("hashed text: %v", err)
	}
	body := h[fixed:]
	contents := make([][]byte, nseg)
	for i, s := range segs {
		if s.Memsz > uint64(len(body)) {
			return nil, formatErr("hashed text: segment %d is %d bytes, only %d are left", i, s.Memsz, len(body))
		}
		// Bounded, so the layout's offsets cannot overflow.
		if s.Vaddr > math.MaxUint64/2 {
			return nil, formatErr("hashed text: segment %d at vaddr %#x", i, s.Vaddr)
		}
		contents[i], body = body[:s.Memsz], body[s.Memsz:]
	}
	if len(body) != 0 {
		return nil, formatErr("hashed text: %d bytes after the last segment", len(body))
	}
	laid, _, _ := layoutText(segs, spans)
	for i := range segs {
		if laid[i].Offset != segs[i].Offset {
			return nil, formatErr("hashed text: segment %d at text offset %#x, the text layout puts it at %#x", i, segs[i].Offset, laid[i].Offset)
		}
	}
	_, text, err := buildText(m, origPhdr, phnum, segs, contents, spans)
	if err != nil {
		return nil, fmt.Errorf("hashed text: %w", err)
	}
	var th TextHeader
	if err := th.UnmarshalBinary(text); err != nil {
		return nil, err
	}
	return text, nil
}
