package off2f

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode"
	"unicode/utf8"
)

// ErrUnsupported marks inputs OFF2F does not convert (dynamic executables, shared
// libraries, other architectures); the message says why and what to do.
var ErrUnsupported = errors.New("unsupported input")

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}

// program is a parsed input executable: its ELF header fields and program headers.
type program struct {
	raw     []byte
	typ     elf.Type
	mach    elf.Machine
	machine Machine
	flags   uint32
	entry   uint64
	phoff   uint64
	progs   []elf.ProgHeader
}

const ehdrSize, phdrSize = 64, 56

// parseProgram reads and checks an input executable. Only what the loader and the
// kernel rely on is trusted; everything is bounds-checked against the file.
func parseProgram(raw []byte) (*program, error) {
	f, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		if bytes.HasPrefix(raw, []byte(elf.ELFMAG)) {
			return nil, unsupported("malformed or truncated ELF file (%d bytes): %v", len(raw), err)
		}
		return nil, unsupported("%s, not an ELF file: %s", describeNonELF(raw, int64(len(raw))), wantedInput)
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB {
		return nil, unsupported("%v %v ELF; OFF2F handles 64-bit little-endian", f.Class, f.Data)
	}
	m, ok := MachineOfELF(f.Machine)
	if !ok {
		return nil, unsupported("machine %v; OFF2F converts x86-64 (EM_X86_64) and aarch64 (EM_AARCH64) programs", f.Machine)
	}
	p := &program{raw: raw, typ: f.Type, mach: f.Machine, machine: m, entry: f.Entry}
	p.flags = binary.LittleEndian.Uint32(raw[48:])
	p.phoff = binary.LittleEndian.Uint64(raw[32:])
	if n := binary.LittleEndian.Uint16(raw[54:]); n != phdrSize {
		return nil, unsupported("program header entry size %d, want %d", n, phdrSize)
	}
	for _, pr := range f.Progs {
		p.progs = append(p.progs, pr.ProgHeader)
	}
	switch f.Type {
	case elf.ET_EXEC, elf.ET_DYN:
	default:
		return nil, unsupported("ELF type %v is not an executable", f.Type)
	}
	for _, ph := range p.progs {
		if ph.Type == elf.PT_NOTE && p.hasOFF2FNote(ph) {
			return nil, unsupported("already an OFF2F header file; convert the original executable")
		}
	}
	for _, ph := range p.progs {
		switch ph.Type {
		case elf.PT_INTERP:
			interp := ""
			if ph.Off < uint64(len(raw)) && ph.Filesz <= uint64(len(raw))-ph.Off {
				interp = string(bytes.TrimRight(raw[ph.Off:ph.Off+ph.Filesz], "\x00"))
			}
			return nil, unsupported("dynamically linked (interpreter %q); OFF2F converts static executables: link with -static or -static-pie (Go: CGO_ENABLED=0; a Go PIE is static only when linked externally: -buildmode=pie -ldflags='-linkmode=external -extldflags=-static-pie')", interp)
		}
	}
	if f.Type == elf.ET_DYN {
		if f.Entry == 0 {
			return nil, unsupported("shared library (ET_DYN without an entry point), not an executable")
		}
		if !isPIE(f) {
			return nil, unsupported("ET_DYN without PT_DYNAMIC or DF_1_PIE: a shared object, not a static-pie executable (Go: build with -buildmode=pie -ldflags='-linkmode=external -extldflags=-static-pie')")
		}
	}
	return p, p.checkLoads()
}

func isPIE(f *elf.File) bool {
	flags, err := f.DynValue(elf.DT_FLAGS_1)
	if err != nil {
		// A static-pie without a dynamic section cannot relocate itself; a PIE
		// from an internal linker may omit DT_FLAGS_1 but still has PT_DYNAMIC.
		for _, p := range f.Progs {
			if p.Type == elf.PT_DYNAMIC {
				return true
			}
		}
		return false
	}
	for _, v := range flags {
		if v&uint64(elf.DF_1_PIE) != 0 {
			return true
		}
	}
	return false
}

func (p *program) hasOFF2FNote(ph elf.ProgHeader) bool {
	if ph.Off >= uint64(len(p.raw)) || ph.Filesz > uint64(len(p.raw))-ph.Off {
		return false
	}
	_, ok := findNote(p.raw[ph.Off:ph.Off+ph.Filesz], NoteName, NoteType)
	return ok
}

// checkLoads validates the PT_LOAD segments the way the kernel would, so a
// conversion never produces a header file the kernel rejects.
func (p *program) checkLoads() error {
	var prevEnd uint64
	n := 0
	for i, ph := range p.progs {
		if ph.Type != elf.PT_LOAD {
			continue
		}
		switch {
		case ph.Memsz == 0:
			continue
		case ph.Filesz > ph.Memsz:
			return unsupported("segment %d: filesz %#x > memsz %#x", i, ph.Filesz, ph.Memsz)
		case ph.Off > uint64(len(p.raw)) || ph.Filesz > uint64(len(p.raw))-ph.Off:
			return unsupported("segment %d: [%#x, +%#x) runs past the end of the %d-byte file (truncated?)", i, ph.Off, ph.Filesz, len(p.raw))
		case ph.Vaddr%PageSize != ph.Off%PageSize:
			return unsupported("segment %d: vaddr %#x and offset %#x differ modulo the page size", i, ph.Vaddr, ph.Off)
		case ph.Vaddr >= userTop || ph.Memsz >= userTop-ph.Vaddr:
			return unsupported("segment %d: [%#x, +%#x) is outside user space", i, ph.Vaddr, ph.Memsz)
		case n > 0 && ph.Vaddr < prevEnd:
			return unsupported("segment %d at %#x is not above the previous one", i, ph.Vaddr)
		}
		prevEnd = ph.Vaddr + ph.Memsz
		n++
	}
	if n == 0 {
		return unsupported("no loadable segments")
	}
	return nil
}

func isText(ph elf.ProgHeader) bool {
	return ph.Type == elf.PT_LOAD && ph.Memsz > 0 && ph.Flags&elf.PF_W == 0
}

func isData(ph elf.ProgHeader) bool {
	return ph.Type == elf.PT_LOAD && ph.Memsz > 0 && ph.Flags&elf.PF_W != 0
}

func prot(f elf.ProgFlag) uint32 {
	var p uint32
	if f&elf.PF_R != 0 {
		p |= ProtRead
	}
	if f&elf.PF_W != 0 {
		p |= ProtWrite
	}
	if f&elf.PF_X != 0 {
		p |= ProtExec
	}
	return p
}

// segmentContents returns memsz bytes of a segment: its file bytes, then zeros.
func (p *program) segmentContents(ph elf.ProgHeader) []byte {
	b := make([]byte, ph.Memsz)
	copy(b, p.raw[ph.Off:ph.Off+ph.Filesz])
	return b
}

// findNote walks an ELF note area (4-byte aligned entries) for name and type.
func findNote(b []byte, name string, typ uint32) ([]byte, bool) {
	for len(b) >= 12 {
		namesz, descsz, t := le.Uint32(b[0:]), le.Uint32(b[4:]), le.Uint32(b[8:])
		nameEnd := 12 + align4(uint64(namesz))
		descEnd := nameEnd + align4(uint64(descsz))
		if nameEnd > uint64(len(b)) || descEnd > uint64(len(b)) {
			return nil, false
		}
		n := b[12 : 12+namesz]
		if t == typ && namesz == uint32(len(name)+1) && string(n[:len(name)]) == name && n[len(name)] == 0 {
			return b[nameEnd : nameEnd+uint64(descsz)], true
		}
		b = b[descEnd:]
	}
	return nil, false
}

func align4(x uint64) uint64 { return (x + 3) &^ 3 }

// ReadOnlyBytes sums the memory size of the read-only PT_LOADs of the ELF
// file at path: what Convert moves into the text file (text and rodata).
func ReadOnlyBytes(path string) (uint64, error) {
	f, err := elf.Open(path)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			if kind, ok := describeFile(path); ok {
				return 0, fmt.Errorf("%s is %s, not an ELF file: %s", path, kind, wantedInput)
			}
			return 0, fmt.Errorf("%s: malformed or truncated ELF file: %w", path, err)
		}
		return 0, err
	}
	defer f.Close()
	var n uint64
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_W == 0 {
			n += p.Memsz
		}
	}
	return n, nil
}

// wantedInput is what OFF2F converts, for errors about other inputs.
const wantedInput = "OFF2F converts static x86-64 and aarch64 ELF executables (Go: CGO_ENABLED=0 go build of a main package; C: gcc -static)"

// describeFile says what the file at path holds when it is not ELF (ok),
// or ok false when it starts as an ELF file does (then it is a malformed
// one) or cannot be read.
func describeFile(path string) (kind string, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", false
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	if bytes.HasPrefix(head[:n], []byte(elf.ELFMAG)) {
		return "", false
	}
	return describeNonELF(head[:n], st.Size()), true
}

// describeNonELF says what a file of size bytes that starts with head
// holds, when it is not ELF: by its first bytes, the kinds of files that
// are handed to off2f convert or built by nvboot build by mistake. The ELF
// reader's own words ("bad magic number '[35 33 47 98]'", a bare "EOF")
// tell a user nothing.
func describeNonELF(head []byte, size int64) string {
	switch {
	case size == 0:
		return "an empty file"
	case bytes.HasPrefix(head, []byte("#!")):
		line, _, _ := bytes.Cut(head, []byte("\n"))
		line = bytes.TrimSpace(line)
		if len(line) > 60 {
			line = append(line[:60:60], "..."...)
		}
		return fmt.Sprintf("a script (%s)", line)
	case bytes.HasPrefix(head, []byte("!<arch>\n")):
		return "an ar archive (what go build writes for a package that is not main, or a static library)"
	case bytes.HasPrefix(head, TextMagic[:]):
		return "an OFF2F text file (from a text store; convert the original executable)"
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return "gzip-compressed data"
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		return "a zip archive"
	case looksLikeText(head):
		return "a text file"
	case size == 1:
		return "1 byte of data"
	}
	return fmt.Sprintf("%d bytes of data (starting % x)", size, head[:min(len(head), 4)])
}

// looksLikeText says whether b reads as text: UTF-8 of printable characters and
// white space (b may end inside a character: it is a file's head).
func looksLikeText(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return len(b) < utf8.UTFMax && !utf8.FullRune(b)
		}
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
		b = b[n:]
	}
	return true
}
