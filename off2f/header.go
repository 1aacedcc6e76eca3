package off2f

import (
	"debug/elf"
	"encoding/binary"
)

// mmapMinAddr is Linux's default vm.mmap_min_addr: nothing may be mapped below it.
const mmapMinAddr = 0x10000

// buildHeader writes the header file: ELF header, program headers, interpreter
// path and OFF2F note inside one small read-only PT_LOAD (the "header segment"),
// followed by the writable segments with their bytes.
//
// The header segment sits just below the program when there is room (ET_EXEC
// programs at 0x400000), so the writable segment stays the last PT_LOAD; a
// static-pie starts at vaddr 0, so there it sits above the program, aligned to
// the program's largest alignment so the kernel's load bias keeps 2 MiB text
// mappings possible. Either way the read-only segments' range is left free for
// the loader.
//
// With dataInText the single writable segment's bytes are in the text file:
// its PT_LOAD here keeps its memory size with no file bytes, so the kernel
// maps it all as anonymous memory (bss) and the loader maps the data over it.
func buildHeader(p *program, texts, datas, others []elf.ProgHeader, loader string, desc []byte, dataInText bool) ([]byte, error) {
	var lowest, highest, maxAlign uint64 = ^uint64(0), 0, PageSize
	for _, ph := range append(append([]elf.ProgHeader{}, texts...), datas...) {
		lowest = min(lowest, ph.Vaddr)
		highest = max(highest, ph.Vaddr+ph.Memsz)
		if ph.Align > maxAlign && ph.Align&(ph.Align-1) == 0 {
			maxAlign = ph.Align
		}
	}
	for _, t := range texts {
		if t.Memsz >= HugeMin {
			maxAlign = max(maxAlign, HugePageSize)
		}
	}

	// Copy through the program headers that describe writable memory or no
	// memory at all (TLS, DYNAMIC, RELRO, GNU_STACK); those that point into the
	// text are visible to the program through the original table (AT_PHDR).
	var kept []elf.ProgHeader
	for _, ph := range others {
		if ph.Filesz == 0 && ph.Memsz == 0 {
			kept = append(kept, ph)
			continue
		}
		for _, d := range datas {
			if ph.Off >= d.Off && ph.Filesz <= d.Filesz && ph.Off-d.Off <= d.Filesz-ph.Filesz {
				kept = append(kept, ph)
				break
			}
		}
	}

	nph := 2 + len(datas) + 1 + 1 + len(kept) // PHDR, INTERP, data..., header LOAD, NOTE, kept...
	interpOff := uint64(ehdrSize + nph*phdrSize)
	noteOff := align4(interpOff + uint64(len(loader)) + 1)
	noteSize := 12 + align4(uint64(len(NoteName)+1)) + align4(uint64(len(desc)))
	hdrSize := noteOff + noteSize
	hdrSpan := pageUp(hdrSize)

	var hdrVaddr uint64
	below := p.typ == elf.ET_EXEC && pageDown(lowest) >= hdrSpan+mmapMinAddr
	if below {
		hdrVaddr = pageDown(lowest) - hdrSpan
	} else {
		hdrVaddr = (highest + maxAlign - 1) &^ (maxAlign - 1)
		if hdrVaddr+hdrSpan > userTop {
			return nil, unsupported("no room above the program for the OFF2F header segment")
		}
	}
	hdrAlign := uint64(PageSize)
	if !below {
		hdrAlign = maxAlign
	}

	// File layout: header segment at 0, then each writable segment at the next
	// offset congruent to its vaddr modulo the page size.
	newOff := make([]uint64, len(datas))
	cursor := hdrSpan
	if dataInText {
		datas = []elf.ProgHeader{datas[0]}
		datas[0].Filesz = 0
	}
	for i, d := range datas {
		newOff[i] = pageUp(cursor) + d.Vaddr%PageSize
		cursor = newOff[i] + d.Filesz
	}
	out := make([]byte, max(cursor, hdrSize))

	var phs []elf.Prog64
	phs = append(phs,
		elf.Prog64{Type: uint32(elf.PT_PHDR), Flags: uint32(elf.PF_R), Off: ehdrSize, Vaddr: hdrVaddr + ehdrSize, Paddr: hdrVaddr + ehdrSize, Filesz: uint64(nph * phdrSize), Memsz: uint64(nph * phdrSize), Align: 8},
		elf.Prog64{Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R), Off: interpOff, Vaddr: hdrVaddr + interpOff, Paddr: hdrVaddr + interpOff, Filesz: uint64(len(loader)) + 1, Memsz: uint64(len(loader)) + 1, Align: 1},
	)
	hdrLoad := elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R), Off: 0, Vaddr: hdrVaddr, Paddr: hdrVaddr, Filesz: hdrSize, Memsz: hdrSize, Align: hdrAlign}
	if below {
		phs = append(phs, hdrLoad)
	}
	for i, d := range datas {
		phs = append(phs, elf.Prog64{Type: uint32(d.Type), Flags: uint32(d.Flags), Off: newOff[i], Vaddr: d.Vaddr, Paddr: d.Paddr, Filesz: d.Filesz, Memsz: d.Memsz, Align: PageSize})
		copy(out[newOff[i]:], p.raw[d.Off:d.Off+d.Filesz])
	}
	if !below {
		phs = append(phs, hdrLoad)
	}
	phs = append(phs, elf.Prog64{Type: uint32(elf.PT_NOTE), Flags: uint32(elf.PF_R), Off: noteOff, Vaddr: hdrVaddr + noteOff, Paddr: hdrVaddr + noteOff, Filesz: noteSize, Memsz: noteSize, Align: 4})
	for _, ph := range kept {
		off := ph.Off
		for i, d := range datas {
			if ph.Filesz > 0 && ph.Off >= d.Off && ph.Off+ph.Filesz <= d.Off+d.Filesz {
				off = newOff[i] + (ph.Off - d.Off)
			}
		}
		if ph.Filesz == 0 && ph.Memsz == 0 {
			off = 0
		}
		phs = append(phs, elf.Prog64{Type: uint32(ph.Type), Flags: uint32(ph.Flags), Off: off, Vaddr: ph.Vaddr, Paddr: ph.Paddr, Filesz: ph.Filesz, Memsz: ph.Memsz, Align: ph.Align})
	}

	// ELF header: the input's identity, entry and flags; no section headers.
	copy(out[0:16], p.raw[0:16])
	le.PutUint16(out[16:], uint16(p.typ))
	le.PutUint16(out[18:], uint16(p.mach))
	le.PutUint32(out[20:], uint32(elf.EV_CURRENT))
	le.PutUint64(out[24:], p.entry)
	le.PutUint64(out[32:], ehdrSize)
	le.PutUint64(out[40:], 0)
	le.PutUint32(out[48:], p.flags)
	le.PutUint16(out[52:], ehdrSize)
	le.PutUint16(out[54:], phdrSize)
	le.PutUint16(out[56:], uint16(len(phs)))
	le.PutUint16(out[58:], 64)
	le.PutUint16(out[60:], 0)
	le.PutUint16(out[62:], 0)
	for i, ph := range phs {
		putProg(out[ehdrSize+i*phdrSize:], ph)
	}
	copy(out[interpOff:], loader)
	n := out[noteOff:]
	le.PutUint32(n[0:], uint32(len(NoteName)+1))
	le.PutUint32(n[4:], uint32(len(desc)))
	le.PutUint32(n[8:], NoteType)
	copy(n[12:], NoteName)
	copy(n[12+align4(uint64(len(NoteName)+1)):], desc)
	return out, nil
}

func putProg(b []byte, ph elf.Prog64) {
	binary.LittleEndian.PutUint32(b[0:], ph.Type)
	binary.LittleEndian.PutUint32(b[4:], ph.Flags)
	binary.LittleEndian.PutUint64(b[8:], ph.Off)
	binary.LittleEndian.PutUint64(b[16:], ph.Vaddr)
	binary.LittleEndian.PutUint64(b[24:], ph.Paddr)
	binary.LittleEndian.PutUint64(b[32:], ph.Filesz)
	binary.LittleEndian.PutUint64(b[40:], ph.Memsz)
	binary.LittleEndian.PutUint64(b[48:], ph.Align)
}
