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
// Where the header segment goes is placeHeader's choice. Wherever it is,
// the read-only segments' range is left free for the loader.
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

	hdrVaddr, hdrAlign, first, err := placeHeader(p, texts, datas, hdrSpan, lowest, highest, maxAlign)
	if err != nil {
		return nil, err
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
	if first {
		phs = append(phs, hdrLoad)
	}
	for i, d := range datas {
		phs = append(phs, elf.Prog64{Type: uint32(d.Type), Flags: uint32(d.Flags), Off: newOff[i], Vaddr: d.Vaddr, Paddr: d.Paddr, Filesz: d.Filesz, Memsz: d.Memsz, Align: PageSize})
		copy(out[newOff[i]:], p.raw[d.Off:d.Off+d.Filesz])
	}
	if !first {
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

// placeHeader chooses the header segment's vaddr and alignment, and says
// whether it is the first (lowest) PT_LOAD.
//
// x86-64: just below the program when there is room (ET_EXEC programs at
// 0x400000), so the writable segment stays the last PT_LOAD; else (a
// static-pie, at vaddr 0) above the program, aligned to its largest
// alignment so the kernel's load bias keeps 2 MiB text mappings possible.
//
// aarch64: in the gap between the read-only segments and the writable ones
// that 64 KiB segment alignment leaves (Go's programs start at 0x10000,
// mmap_min_addr, with no room below), aligned as above for a static-pie;
// else above the program. In the gap the header is the lowest PT_LOAD and
// the span of the header file's PT_LOADs leaves out the text, so any ELF
// loader finds the program headers and leaves the text's range free: Linux
// derives AT_PHDR from the segment holding them only since 6.0, qemu-user
// (which runs the arm64 tests on an x86-64 host) from the lowest PT_LOAD,
// and qemu-user reserves the whole span.
func placeHeader(p *program, texts, datas []elf.ProgHeader, hdrSpan, lowest, highest, maxAlign uint64) (vaddr, align uint64, first bool, err error) {
	if p.machine == MachineAMD64 && p.typ == elf.ET_EXEC && pageDown(lowest) >= hdrSpan+mmapMinAddr {
		return pageDown(lowest) - hdrSpan, PageSize, true, nil
	}
	if p.machine != MachineAMD64 {
		var textEnd uint64
		dataStart := uint64(userTop)
		for _, t := range texts {
			textEnd = max(textEnd, pageUp(t.Vaddr+t.Memsz))
		}
		for _, d := range datas {
			dataStart = min(dataStart, pageDown(d.Vaddr))
		}
		align := uint64(PageSize)
		if p.typ == elf.ET_DYN {
			align = maxAlign
		}
		if v := (textEnd + align - 1) &^ (align - 1); v >= textEnd && v+hdrSpan <= dataStart {
			return v, align, true, nil
		}
	}
	vaddr = (highest + maxAlign - 1) &^ (maxAlign - 1)
	if vaddr+hdrSpan > userTop {
		return 0, 0, false, unsupported("no room above the program for the OFF2F header segment")
	}
	return vaddr, maxAlign, false, nil
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
