package off2f

import (
	"debug/elf"
	"fmt"
)

// DefaultLoader is where an nvboot appliance keeps ld-off2f (device/contract
// takes its Loader from here).
const DefaultLoader = "/lib/ld-off2f.so.1"

// DefaultStoreDir is where an nvboot appliance mounts the text store
// (device/contract's TextDir).
const DefaultStoreDir = "/nv/text"

// Options say how a program is converted. The directories are the paths the
// loader will use at run time, which need not be where the files are written now.
type Options struct {
	Loader      string // PT_INTERP of the header file; DefaultLoader if empty
	StoreDir    string // text store directory at run time; DefaultStoreDir if empty
	FallbackDir string // directory holding a fallback copy of the text; may be empty
	Device      string // store device the loader mounts as PID 1; may be empty
	FSType      string // filesystem type of Device
	MountOpts   string // mount options for Device, e.g. "dax=always"
	Prefault    bool   // map the text with MAP_POPULATE
	// CRC records the text's CRC-32C in the note (FlagCRC): the loader
	// then reads the whole text at each start and maps the fallback copy
	// when it is damaged. nvboot asks it for PID 1 alone, whose damaged
	// text would otherwise stop every boot.
	CRC bool
	// Arch is the GOARCH the program must be built for ("amd64", "arm64"),
	// "": any machine OFF2F converts. A program for another is refused,
	// naming both: an image is one machine's (one loader, one store).
	Arch string
}

// Converted is the result of a conversion: the header file, the text file and
// the note that ties them together.
type Converted struct {
	Header []byte
	Text   []byte
	Note   Note
}

// TextName is the name of the text file in the store.
func (c *Converted) TextName() string { return HashName(c.Note.Hash) }

// Convert splits a static executable into a header file and a text file.
func Convert(raw []byte, opt Options) (*Converted, error) {
	p, err := parseProgram(raw)
	if err != nil {
		return nil, err
	}
	if opt.Arch != "" {
		want, ok := MachineOfGOARCH(opt.Arch)
		if !ok {
			return nil, fmt.Errorf("off2f: GOARCH %q: OFF2F converts amd64 and arm64 programs", opt.Arch)
		}
		if p.machine != want {
			return nil, fmt.Errorf("off2f: the program is built for %v (GOARCH %s), not %v (GOARCH %s) as asked: one image, one machine", p.machine, p.machine.GOARCH(), want, opt.Arch)
		}
	}
	if opt.Loader == "" {
		opt.Loader = DefaultLoader
	}
	if opt.StoreDir == "" {
		opt.StoreDir = DefaultStoreDir
	}

	var texts, datas, others []elf.ProgHeader
	for _, ph := range p.progs {
		switch {
		case isText(ph):
			texts = append(texts, ph)
		case isData(ph):
			datas = append(datas, ph)
		case ph.Type != elf.PT_LOAD && ph.Type != elf.PT_PHDR:
			others = append(others, ph)
		}
	}
	if len(texts) == 0 || len(texts) > MaxSegments {
		return nil, unsupported("%d read-only segments (want 1..%d)", len(texts), MaxSegments)
	}
	origPhdr, ok := phdrVaddr(p.phoff, uint64(len(p.progs))*phdrSize, texts)
	if !ok {
		return nil, unsupported("program headers at offset %#x are not inside a read-only segment", p.phoff)
	}
	for _, t := range texts {
		for _, d := range datas {
			if pageDown(t.Vaddr) < pageUp(d.Vaddr+d.Memsz) && pageDown(d.Vaddr) < pageUp(t.Vaddr+t.Memsz) {
				return nil, unsupported("read-only segment at %#x shares a page with the writable segment at %#x; relink with -z separate-code", t.Vaddr, d.Vaddr)
			}
		}
	}

	segs := make([]Segment, len(texts))
	contents := make([][]byte, len(texts))
	for i, t := range texts {
		segs[i] = Segment{Vaddr: t.Vaddr, Memsz: t.Memsz, Filesz: t.Filesz, Prot: prot(t.Flags)}
		contents[i] = p.segmentContents(t)
	}
	spans := hugeSpans(p, segs, datas)
	dataInText := dataGoesToText(texts, datas, others)
	if dataInText {
		d := datas[0]
		segs = append(segs, Segment{Vaddr: d.Vaddr, Memsz: d.Filesz, Filesz: d.Filesz, Prot: ProtRead | ProtWrite})
		contents = append(contents, p.raw[d.Off:d.Off+d.Filesz])
	}
	th, text, err := buildText(p.machine, origPhdr, uint32(len(p.progs)), segs, contents, spans)
	if err != nil {
		return nil, fmt.Errorf("building text file: %w", err)
	}
	note := Note{
		Version: Version, Machine: p.machine, Flags: th.Flags, Hash: th.Hash, TextSize: th.Size,
		OrigPhnum: uint32(len(p.progs)), OrigPhdr: origPhdr,
		StoreDir: opt.StoreDir, FallbackDir: opt.FallbackDir,
		Device: opt.Device, FSType: opt.FSType, Options: opt.MountOpts,
		Segments: th.Segments,
	}
	if opt.Prefault {
		note.Flags |= FlagPrefault
	}
	if p.typ == elf.ET_DYN {
		note.Flags |= FlagDyn
	}
	if opt.CRC {
		note.Flags |= FlagCRC
		note.CRC = TextCRC(contents)
	}
	desc, err := note.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encoding note: %w", err)
	}
	// The header segment goes outside the spans, as it goes outside the text.
	placed := texts
	if spans {
		placed = make([]elf.ProgHeader, len(texts))
		for i, t := range texts {
			start, size, _, _ := segs[i].span(FlagHugeSpan)
			placed[i] = t
			placed[i].Vaddr, placed[i].Memsz = start, size
		}
	}
	hdr, err := buildHeader(p, placed, datas, others, opt.Loader, desc, dataInText)
	if err != nil {
		return nil, err
	}
	return &Converted{Header: hdr, Text: text, Note: note}, nil
}

// hugeSpans says whether the read-only segments segs are mapped with 2 MiB
// spans (FlagHugeSpan): the program is x86-64 ET_EXEC (at fixed addresses,
// its header segment below it) and every span lies above mmap_min_addr,
// apart from the other spans and from every writable segment's pages. Go's
// programs linked with -R 0x200000 are; Go's default layout (rodata right
// after the text, in the text's last 2 MiB) is not, and is converted as it
// was before the flag. aarch64 is left out: its header segment sits in the
// gap below the data (for qemu-user) that the spans would take.
func hugeSpans(p *program, segs []Segment, datas []elf.ProgHeader) bool {
	if p.machine != MachineAMD64 || p.typ != elf.ET_EXEC {
		return false
	}
	var prevEnd uint64
	for _, s := range segs {
		start, size, _, _ := s.span(FlagHugeSpan)
		if start < mmapMinAddr || start < prevEnd || start+size > userTop {
			return false
		}
		for _, d := range datas {
			if start < pageUp(d.Vaddr+d.Memsz) && pageDown(d.Vaddr) < start+size {
				return false
			}
		}
		prevEnd = start + size
	}
	return true
}

// dataGoesToText says whether the writable data's initial image goes into the
// text file, beside the read-only segments, instead of into the header file.
// Its bytes are as read-only as the text: the process writes only its
// private copy. From the text store they are mapped copy-on-write from pmem,
// as a DAX filesystem maps an ELF's data, instead of read from the card at
// every start. It takes one writable segment starting on a page boundary
// above the text (Go's static programs), and no program header with file
// bytes inside it (a PT_TLS template): the kernel then maps the whole
// segment as anonymous memory from the header file's PT_LOAD, whose file
// part is empty, and the loader maps the image over its start.
func dataGoesToText(texts, datas, others []elf.ProgHeader) bool {
	if len(datas) != 1 || datas[0].Filesz == 0 || datas[0].Vaddr%PageSize != 0 {
		return false
	}
	d := datas[0]
	for _, t := range texts {
		if t.Vaddr > d.Vaddr {
			return false
		}
	}
	for _, o := range others {
		if o.Filesz > 0 && o.Off >= d.Off && o.Off < d.Off+d.Filesz {
			return false
		}
	}
	return true
}

func phdrVaddr(off, size uint64, texts []elf.ProgHeader) (uint64, bool) {
	for _, t := range texts {
		if off >= t.Off && size <= t.Filesz && off-t.Off <= t.Filesz-size {
			return t.Vaddr + (off - t.Off), true
		}
	}
	return 0, false
}
