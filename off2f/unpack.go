package off2f

import (
	"debug/elf"
	"fmt"
)

// Unpack rebuilds an executable from a header file and its text file: every
// loadable segment of the original, byte-identical, at its original file offset,
// with the original ELF header and program headers (which lie inside the text).
// Section headers and unloaded data (symbols, debug info) are not part of an
// OFF2F program, just as after strip(1); the rebuilt file runs identically.
func Unpack(header, text []byte) ([]byte, error) {
	h, err := ParseHeader(header)
	if err != nil {
		return nil, fmt.Errorf("header file: %w", err)
	}
	th, err := ParseText(text)
	if err != nil {
		return nil, fmt.Errorf("text file: %w", err)
	}
	if err := h.CheckText(th); err != nil {
		return nil, err
	}
	mem := func(va, n uint64) ([]byte, bool) {
		for _, s := range th.Segments {
			if va >= s.Vaddr && n <= s.Memsz && va-s.Vaddr <= s.Memsz-n {
				o := s.Offset + va - s.Vaddr
				return text[o : o+n], true
			}
		}
		return nil, false
	}
	phb, _ := mem(h.Note.OrigPhdr, uint64(h.Note.OrigPhnum)*phdrSize) // checked by ParseHeader
	orig := make([]elf.ProgHeader, h.Note.OrigPhnum)
	for i := range orig {
		p := phb[i*phdrSize:]
		orig[i] = elf.ProgHeader{
			Type: elf.ProgType(le.Uint32(p[0:])), Flags: elf.ProgFlag(le.Uint32(p[4:])),
			Off: le.Uint64(p[8:]), Vaddr: le.Uint64(p[16:]), Paddr: le.Uint64(p[24:]),
			Filesz: le.Uint64(p[32:]), Memsz: le.Uint64(p[40:]), Align: le.Uint64(p[48:]),
		}
	}

	var size uint64
	type piece struct {
		off  uint64
		data []byte
	}
	var pieces []piece
	for i, ph := range orig {
		if ph.Type != elf.PT_LOAD || ph.Memsz == 0 {
			continue
		}
		data, inText := mem(ph.Vaddr, ph.Filesz)
		switch {
		case ph.Flags&elf.PF_W == 0:
			if !inText {
				return nil, formatErr("original segment %d at %#x is not in the text file", i, ph.Vaddr)
			}
		case inText && ph.Filesz > 0:
			// the data's image, kept in the text file
		default:
			data = nil
			for _, hp := range h.Progs {
				if hp.Type == elf.PT_LOAD && hp.Vaddr == ph.Vaddr && hp.Filesz == ph.Filesz {
					data = header[hp.Off : hp.Off+hp.Filesz]
				}
			}
			if data == nil && ph.Filesz > 0 {
				return nil, formatErr("original writable segment %d at %#x is not in the header file", i, ph.Vaddr)
			}
		}
		if ph.Off > 1<<40 || ph.Filesz > 1<<40 {
			return nil, formatErr("original segment %d has an implausible offset %#x", i, ph.Off)
		}
		pieces = append(pieces, piece{ph.Off, data})
		size = max(size, ph.Off+ph.Filesz)
	}
	out := make([]byte, size)
	for _, p := range pieces {
		copy(out[p.off:], p.data)
	}
	if size < ehdrSize || string(out[:4]) != elf.ELFMAG {
		return nil, formatErr("the original ELF header is not inside a loadable segment")
	}
	return out, nil
}
