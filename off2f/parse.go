package off2f

import (
	"bytes"
	"debug/elf"
	"fmt"
)

// Header is a parsed OFF2F header file.
type Header struct {
	Type   elf.Type
	Entry  uint64
	Interp string
	Progs  []elf.ProgHeader
	Note   Note
}

// ParseHeader decodes an OFF2F header file and checks it as the loader would:
// a valid ELF with an interpreter, exactly one OFF2F note, and no loadable segment
// of its own in the range the text will be mapped into.
func ParseHeader(raw []byte) (*Header, error) {
	f, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		if !bytes.HasPrefix(raw, []byte(elf.ELFMAG)) {
			return nil, formatErr("%s, not an ELF file: want an OFF2F header file (what off2f convert writes)", describeNonELF(raw, int64(len(raw))))
		}
		return nil, formatErr("not an ELF file: %v", err)
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB {
		return nil, formatErr("%v %v ELF, want 64-bit little-endian", f.Class, f.Data)
	}
	h := &Header{Type: f.Type, Entry: f.Entry}
	found := 0
	for _, pr := range f.Progs {
		ph := pr.ProgHeader
		h.Progs = append(h.Progs, ph)
		if ph.Type != elf.PT_INTERP && ph.Type != elf.PT_NOTE && ph.Type != elf.PT_LOAD {
			continue
		}
		if ph.Off > uint64(len(raw)) || ph.Filesz > uint64(len(raw))-ph.Off {
			return nil, formatErr("%v segment [%#x, +%#x) runs past the end of the %d-byte file", ph.Type, ph.Off, ph.Filesz, len(raw))
		}
		body := raw[ph.Off : ph.Off+ph.Filesz]
		switch ph.Type {
		case elf.PT_INTERP:
			h.Interp = string(bytes.TrimRight(body, "\x00"))
		case elf.PT_NOTE:
			desc, ok := findNote(body, NoteName, NoteType)
			if !ok {
				continue
			}
			if found++; found > 1 {
				return nil, formatErr("more than one OFF2F note")
			}
			if err := h.Note.UnmarshalBinary(desc); err != nil {
				return nil, err
			}
		}
	}
	if found == 0 {
		return nil, formatErr("no OFF2F note (not converted by off2f?)")
	}
	if h.Interp == "" {
		return nil, formatErr("no PT_INTERP: the kernel would not start the loader")
	}
	if f.Machine != h.Note.Machine.ELF() {
		return nil, formatErr("ELF machine %v disagrees with the note's %v", f.Machine, h.Note.Machine)
	}
	if (h.Type == elf.ET_DYN) != (h.Note.Flags&FlagDyn != 0) {
		return nil, formatErr("ELF type %v disagrees with the note's flags %#x", h.Type, h.Note.Flags)
	}
	for _, ph := range h.Progs {
		if ph.Type != elf.PT_LOAD || ph.Memsz == 0 {
			continue
		}
		for i, s := range h.Note.Segments {
			if s.Prot&ProtWrite != 0 && ph.Flags&elf.PF_W != 0 && ph.Filesz == 0 && ph.Vaddr == s.Vaddr && s.Memsz <= ph.Memsz {
				continue // the data's image, mapped over this segment's anonymous memory
			}
			start, size, _, _ := s.span(h.Note.Flags)
			if pageDown(ph.Vaddr) < start+size && start < pageUp(ph.Vaddr+ph.Memsz) {
				return nil, formatErr("loadable segment at %#x overlaps text segment %d at %#x", ph.Vaddr, i, s.Vaddr)
			}
		}
	}
	return h, nil
}

// CheckText checks a text header page against the header's note, exactly the
// checks the loader makes before it maps anything.
func (h *Header) CheckText(th *TextHeader) error {
	n := &h.Note
	switch {
	case th.Machine != n.Machine:
		return fmt.Errorf("text is built for %v, the note for %v", th.Machine, n.Machine)
	case th.Hash != n.Hash:
		return fmt.Errorf("text hash %s does not match the note's %s", HashName(th.Hash), HashName(n.Hash))
	case th.Flags&FlagHugeSpan != n.Flags&FlagHugeSpan:
		return fmt.Errorf("text's 2 MiB spans (flags %#x) do not match the note's (flags %#x)", th.Flags, n.Flags)
	case th.Size != n.TextSize:
		return fmt.Errorf("text file size %d does not match the note's %d", th.Size, n.TextSize)
	case th.OrigPhdr != n.OrigPhdr || th.OrigPhnum != n.OrigPhnum:
		return fmt.Errorf("text's original program headers (%d at %#x) do not match the note's (%d at %#x)", th.OrigPhnum, th.OrigPhdr, n.OrigPhnum, n.OrigPhdr)
	case len(th.Segments) != len(n.Segments):
		return fmt.Errorf("text file has %d segments, the note %d", len(th.Segments), len(n.Segments))
	}
	for i := range th.Segments {
		if th.Segments[i] != n.Segments[i] {
			return fmt.Errorf("text segment %d %+v does not match the note's %+v", i, th.Segments[i], n.Segments[i])
		}
	}
	return nil
}

// WithFallbackDir returns a copy of the header file raw whose note names
// dir as its fallback directory ("": none); every other byte is raw's. A
// device that keeps a program's clean copy somewhere of its own (nvinit
// does for a deployed program) names it so, and the loader and the text
// repair both find it there.
func WithFallbackDir(raw []byte, dir string) ([]byte, error) {
	h, err := ParseHeader(raw)
	if err != nil {
		return nil, err
	}
	if dir != "" && dir[0] != '/' {
		return nil, fmt.Errorf("fallback directory %q is not an absolute path", dir)
	}
	n := h.Note
	n.FallbackDir = dir
	desc, err := n.MarshalBinary()
	if err != nil {
		return nil, err
	}
	out := bytes.Clone(raw)
	for _, ph := range h.Progs {
		if ph.Type != elf.PT_NOTE {
			continue
		}
		// ParseHeader checked the bounds, and that exactly one note is OFF2F's.
		if d, ok := findNote(out[ph.Off:ph.Off+ph.Filesz], NoteName, NoteType); ok {
			if len(d) != len(desc) {
				return nil, formatErr("note is %d bytes, its encoding %d", len(d), len(desc))
			}
			copy(d, desc)
			return out, nil
		}
	}
	return nil, formatErr("no OFF2F note (not converted by off2f?)")
}
