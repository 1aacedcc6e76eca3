package off2f

import (
	"bytes"
	"debug/elf"
	"errors"
	"strings"
	"testing"
)

// TestFormatFrozen pins every size and offset of the on-disk formats, shared with
// loader/off2f.h: changing one without bumping Version must fail here.
func TestFormatFrozen(t *testing.T) {
	n := Note{Version: Version, StoreDir: "/nv/text", OrigPhnum: 1, OrigPhdr: 0x400040, TextSize: 2 * PageSize,
		Segments: []Segment{{Vaddr: 0x400000, Memsz: 0x1000, Filesz: 90, Offset: PageSize, Prot: ProtRead | ProtExec}}}
	n.Hash[0], n.Hash[31] = 0xaa, 0xbb
	n.Machine = MachineARM64
	b, err := n.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		off, size int
		want      uint64
	}{
		{"version", 0, 2, Version},
		{"machine", 2, 2, uint64(MachineARM64)},
		{"hash[0]", 8, 1, 0xaa},
		{"hash[31]", 39, 1, 0xbb},
		{"text size", 40, 8, 2 * PageSize},
		{"nseg", 48, 4, 1},
		{"orig phnum", 52, 4, 1},
		{"orig phdr", 56, 8, 0x400040},
		{"store dir[0]", 64, 1, '/'},
		{"seg vaddr", 448, 8, 0x400000},
		{"seg memsz", 456, 8, 0x1000},
		{"seg filesz", 464, 8, 90},
		{"seg offset", 472, 8, PageSize},
		{"seg prot", 480, 4, ProtRead | ProtExec},
	}
	for _, c := range checks {
		var got uint64
		for i := c.size - 1; i >= 0; i-- {
			got = got<<8 | uint64(b[c.off+i])
		}
		if got != c.want {
			t.Errorf("note %s at %d: got %#x want %#x", c.name, c.off, got, c.want)
		}
	}
	if len(b) != 448+40 || NoteFixedSize != 448 || SegmentSize != 40 || TextHeaderFixedSize != 80 || TextHeaderSize != 4096 {
		t.Errorf("sizes changed: note %d", len(b))
	}
	th := TextHeader{Version: Version, Machine: MachineARM64, Hash: n.Hash, Size: 2 * PageSize, OrigPhdr: 0x400040, OrigPhnum: 1, Segments: n.Segments}
	tb, err := th.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if string(tb[0:8]) != "OFF2FTXT" || tb[8] != Version || tb[9] != 0 || tb[10] != byte(MachineARM64) || tb[11] != 0 || tb[16] != 0xaa || tb[48] != 0 || tb[49] != 0x20 ||
		tb[56] != 1 || tb[61] != 0x10 || tb[64] != 0x40 || tb[72] != 1 || tb[80+2] != 0x40 {
		t.Errorf("text header layout changed: % x", tb[:96])
	}
	var n2 Note
	if err := n2.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if n2.StoreDir != n.StoreDir || n2.Segments[0] != n.Segments[0] || n2.Hash != n.Hash || n2.Machine != MachineARM64 {
		t.Errorf("round trip: %+v", n2)
	}
	var th2 TextHeader
	if err := th2.UnmarshalBinary(tb); err != nil || th2.Machine != MachineARM64 {
		t.Errorf("text header round trip: %v %+v", err, th2)
	}
	// The hash, which names texts in stores, is frozen too: SHA-256 of
	// u64 0x400040, u32 1, u16 machine, u16 0, the segment table, 4096
	// zeros. x86-64's machine is 0, so its texts keep their names.
	contents := [][]byte{make([]byte, 0x1000)}
	for _, c := range []struct {
		m    Machine
		want string
	}{
		{MachineAMD64, "e28012485f8508f2d5903a2509a77f81bde5a768d5f64cfe053ffaae9df3e3b8"},
		{MachineARM64, "aec7e82e59785b30384df9386336def9dd77be4d47cd415672b2814839975571"},
	} {
		if got := HashName(TextHash(c.m, 0, 0x400040, 1, n.Segments, contents)); got != c.want {
			t.Errorf("TextHash for %v = %s, want %s", c.m, got, c.want)
		}
	}
	// FlagHugeSpan is in the hash, as the u16 after the machine: a text
	// laid out with 2 MiB spans is another text. Every other flag is not.
	if FlagHugeSpan != 16 {
		t.Errorf("FlagHugeSpan %d", FlagHugeSpan)
	}
	if got := HashName(TextHash(MachineAMD64, FlagHugeSpan|FlagHuge|FlagCRC, 0x400040, 1, n.Segments, contents)); got != "b1ee6993b30a34bd400a502d1cafe8491fec1ae234d8c9ccd3163bb6cadb69ea" {
		t.Errorf("TextHash with FlagHugeSpan = %s", got)
	}
	if got := HashName(TextHash(MachineAMD64, FlagHuge|FlagCRC|FlagPrefault|FlagDyn, 0x400040, 1, n.Segments, contents)); got != "e28012485f8508f2d5903a2509a77f81bde5a768d5f64cfe053ffaae9df3e3b8" {
		t.Errorf("TextHash with flags other than FlagHugeSpan = %s", got)
	}
	// FlagCRC adds the trailer after the segments, u32 CRC and u32 zero,
	// and nothing else changes; the CRC is CRC-32C (Castagnoli) of the
	// segments' bytes: 4096 zeros here.
	if FlagCRC != 8 || NoteCRCSize != 8 {
		t.Errorf("FlagCRC %d, NoteCRCSize %d", FlagCRC, NoteCRCSize)
	}
	if got := TextCRC(contents); got != 0x98f94189 {
		t.Errorf("TextCRC of 4096 zeros = %#x, want 0x98f94189", got)
	}
	nc := n
	nc.Flags, nc.CRC = FlagCRC, 0x98f94189
	cb, err := nc.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(cb) != 448+40+8 || string(cb[8:488]) != string(b[8:488]) || le.Uint32(cb[488:]) != 0x98f94189 || le.Uint32(cb[492:]) != 0 || le.Uint32(cb[4:]) != FlagCRC {
		t.Errorf("note with a CRC: % x", cb[480:])
	}
	var nc2 Note
	if err := nc2.UnmarshalBinary(cb); err != nil || nc2.CRC != 0x98f94189 || nc2.Flags != FlagCRC {
		t.Errorf("round trip of a note with a CRC: %v %+v", err, nc2)
	}
}

// The machines' names, ELF numbers and GOARCHes, both ways.
func TestMachineNames(t *testing.T) {
	for _, c := range []struct {
		m            Machine
		name, goarch string
		em           elf.Machine
	}{{MachineAMD64, "x86-64", "amd64", elf.EM_X86_64}, {MachineARM64, "aarch64", "arm64", elf.EM_AARCH64}} {
		if c.m.String() != c.name || c.m.GOARCH() != c.goarch || c.m.ELF() != c.em {
			t.Errorf("%d: %q %q %v, want %q %q %v", c.m, c.m.String(), c.m.GOARCH(), c.m.ELF(), c.name, c.goarch, c.em)
		}
		if m, ok := MachineOfGOARCH(c.goarch); !ok || m != c.m {
			t.Errorf("MachineOfGOARCH(%q) = %v, %v", c.goarch, m, ok)
		}
		if m, ok := MachineOfELF(c.em); !ok || m != c.m {
			t.Errorf("MachineOfELF(%v) = %v, %v", c.em, m, ok)
		}
	}
	if _, ok := MachineOfGOARCH("riscv64"); ok {
		t.Error("riscv64 has a machine")
	}
	if _, ok := MachineOfELF(elf.EM_RISCV); ok {
		t.Error("EM_RISCV has a machine")
	}
	if m := Machine(9); m.String() != "machine 9" || m.GOARCH() != "" || m.ELF() != elf.EM_NONE {
		t.Errorf("unknown machine: %q %q %v", m.String(), m.GOARCH(), m.ELF())
	}
}

func TestNoteRejects(t *testing.T) {
	good := func() *Note {
		return &Note{Version: Version, StoreDir: "/nv/text", OrigPhnum: 2, OrigPhdr: 0x400040, TextSize: 3 * PageSize,
			Segments: []Segment{{Vaddr: 0x400000, Memsz: 0x1000, Filesz: 0x1000, Offset: PageSize, Prot: ProtRead | ProtExec}}}
	}
	cases := []struct {
		name string
		mod  func(n *Note)
		want string
	}{
		{"relative store", func(n *Note) { n.StoreDir = "nv/text" }, "not an absolute path"},
		{"writable", func(n *Note) { n.Segments[0].Prot |= ProtWrite }, "neither read-only"},
		{"data not last", func(n *Note) {
			n.Segments[0].Prot = ProtRead | ProtWrite
			n.Segments = append(n.Segments, Segment{Vaddr: 0x401000, Memsz: 0x100, Filesz: 0x100, Offset: 2 * PageSize, Prot: ProtRead})
		}, "must be the last"},
		{"data with bss", func(n *Note) { n.Segments[0].Prot, n.Segments[0].Filesz = ProtRead|ProtWrite, 0x800 }, "no bss"},
		{"data unaligned", func(n *Note) {
			n.Segments[0].Prot, n.Segments[0].Vaddr, n.Segments[0].Offset, n.OrigPhdr = ProtRead|ProtWrite, 0x400800, PageSize+0x800, 0x400840
		}, "page-aligned"},
		{"offset not congruent", func(n *Note) { n.Segments[0].Offset += 8 }, "differ modulo the page size"},
		{"past end", func(n *Note) { n.TextSize = PageSize }, "past the end"},
		{"over header page", func(n *Note) { n.Segments[0].Offset = 0 }, "overlaps the header page"},
		{"kernel address", func(n *Note) { n.Segments[0].Vaddr = 1 << 63 }, "outside user space"},
		{"phdr outside", func(n *Note) { n.OrigPhdr = 0x500000 }, "not inside a text segment"},
		{"filesz > memsz", func(n *Note) { n.Segments[0].Filesz = 0x2000 }, "filesz"},
		{"unknown flag", func(n *Note) { n.Flags = 1 << 20 }, "unknown flags"},
		{"unknown machine", func(n *Note) { n.Machine = 7 }, "names machine 7"},
		{"overlap", func(n *Note) {
			n.Segments = append(n.Segments, Segment{Vaddr: 0x400800, Memsz: 0x100, Filesz: 0x100, Offset: 2*PageSize + 0x800, Prot: ProtRead})
		}, "overlaps"},
	}
	// With FlagHugeSpan every read-only segment is mapped in whole 2 MiB
	// pages, from file offsets that must hold it.
	spanned := func(n *Note) {
		n.Flags |= FlagHugeSpan
		n.TextSize = 8 << 20
		n.Segments = []Segment{
			{Vaddr: 0x400000, Memsz: 0x1000, Filesz: 0x1000, Offset: 2 << 20, Prot: ProtRead | ProtExec},
			{Vaddr: 0x600000, Memsz: 0x1000, Filesz: 0x1000, Offset: 4 << 20, Prot: ProtRead},
			{Vaddr: 0x800000, Memsz: 0x1000, Filesz: 0x1000, Offset: 6 << 20, Prot: ProtRead | ProtWrite},
		}
	}
	cases = append(cases, []struct {
		name string
		mod  func(n *Note)
		want string
	}{
		{"span not 2 MiB-congruent", func(n *Note) { spanned(n); n.Segments[1].Offset += 0x1000 }, "differ modulo 2 MiB"},
		{"span over the header page", func(n *Note) {
			spanned(n)
			n.Segments = n.Segments[:1]
			n.Segments[0].Vaddr, n.Segments[0].Offset, n.OrigPhdr = 0x401000, 0x1000, 0x401040
		}, "overlaps the header page"},
		{"span past the end", func(n *Note) { spanned(n); n.Segments = n.Segments[:2]; n.TextSize = 4<<20 + 0x1000 }, "span [0x400000, +0x200000) runs past the end"},
		{"spans overlap", func(n *Note) { spanned(n); n.Segments[1].Vaddr, n.Segments[1].Offset = 0x500000, 3<<20 }, "overlaps or precedes"},
		{"data in a span", func(n *Note) { spanned(n); n.Segments[2].Vaddr, n.Segments[2].Offset = 0x7ff000, 6<<20-0x1000 }, "overlaps or precedes"},
		{"data in a span's file range", func(n *Note) { spanned(n); n.Segments[2].Vaddr, n.Segments[2].Offset = 0x801000, 5<<20+0x1000 }, "overlaps segment 1 in the text file"},
	}...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := good()
			c.mod(n)
			b, err := n.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var out Note
			err = out.UnmarshalBinary(b)
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrFormat containing %q", err, c.want)
			}
		})
	}
	if _, err := (&Note{StoreDir: strings.Repeat("/a", 100), Segments: good().Segments}).MarshalBinary(); err == nil {
		t.Error("an over-long store path was encoded")
	}
	// The CRC's trailer: only with its flag, its reserved word zero, the
	// size agreeing with the flag.
	n := good()
	n.CRC = 1
	if _, err := n.MarshalBinary(); err == nil || !strings.Contains(err.Error(), "without FlagCRC") {
		t.Errorf("a CRC without FlagCRC was encoded: %v", err)
	}
	n.Flags |= FlagCRC
	b, err := n.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"reserved after the CRC", append(b[:len(b)-1:len(b)-1], 1), "reserved field after the CRC"},
		{"flag without the trailer", b[:len(b)-NoteCRCSize], "want 496 for 1 segments and a CRC"},
		{"trailer without the flag", func() []byte { c := bytes.Clone(b); c[4] &^= FlagCRC; return c }(), "want 488 for 1 segments"},
	} {
		var out Note
		if err := out.UnmarshalBinary(c.b); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want ErrFormat containing %q", c.name, err, c.want)
		}
	}
}

func TestLayoutAlignsHugeSegments(t *testing.T) {
	segs, size, huge := layoutText([]Segment{
		{Vaddr: 0x400000, Memsz: 3 << 20, Prot: ProtRead | ProtExec},
		{Vaddr: 0x700000 + 0x123, Memsz: 0x1000, Prot: ProtRead},
	}, false)
	if !huge || segs[0].Offset%HugePageSize != 0x400000%HugePageSize || segs[0].Offset < TextHeaderSize {
		t.Errorf("huge segment at offset %#x", segs[0].Offset)
	}
	if segs[1].Offset%PageSize != 0x123 || segs[1].Offset < segs[0].Offset+segs[0].Memsz {
		t.Errorf("small segment at offset %#x", segs[1].Offset)
	}
	if size%PageSize != 0 || size < segs[1].Offset+segs[1].Memsz {
		t.Errorf("size %#x", size)
	}
}

// With spans every read-only segment gets its whole 2 MiB span in the file,
// congruent, after the previous span; the data image follows the last; the
// filler, never zero, is everywhere in a span but the segment itself.
func TestLayoutSpans(t *testing.T) {
	in := []Segment{
		{Vaddr: 0x400000, Memsz: 0x380cd1, Filesz: 0x380cd1, Prot: ProtRead | ProtExec},
		{Vaddr: 0x800000, Memsz: 0x3990b0, Filesz: 0x3990b0, Prot: ProtRead},
		{Vaddr: 0xc00000, Memsz: 0x5cfa0, Filesz: 0x5cfa0, Prot: ProtRead | ProtWrite},
	}
	contents := make([][]byte, len(in))
	for i, s := range in {
		contents[i] = bytes.Repeat([]byte{byte(i + 1)}, int(s.Memsz))
	}
	th, text, err := buildText(MachineAMD64, 0x400040, 5, in, contents, true)
	if err != nil {
		t.Fatal(err)
	}
	if th.Flags != FlagHuge|FlagHugeSpan {
		t.Errorf("flags %#x", th.Flags)
	}
	for i, want := range []uint64{2 << 20, 6 << 20, 10 << 20} {
		if th.Segments[i].Offset != want {
			t.Errorf("segment %d at offset %#x, want %#x", i, th.Segments[i].Offset, want)
		}
	}
	if want := uint64(10<<20 + 0x5d000); th.Size != want || uint64(len(text)) != want {
		t.Errorf("size %#x (%d bytes), want %#x", th.Size, len(text), want)
	}
	for i, s := range th.Segments[:2] {
		start, size, lead, _ := s.span(th.Flags)
		if start%HugePageSize != 0 || size%HugePageSize != 0 || lead != 0 {
			t.Errorf("segment %d spans [%#x, +%#x)", i, start, size)
		}
		for off := s.Offset + s.Memsz; off < s.Offset+size; off++ {
			if text[off] != spanFill {
				t.Fatalf("segment %d: byte %#x of its span is %#x, not the filler", i, off, text[off])
			}
		}
	}
	if _, err := ParseText(text); err != nil {
		t.Errorf("ParseText: %v", err)
	}
	// The same segments without spans are laid out as before the flag (the
	// data right after the rodata): another table, another hash.
	plain, _, _ := layoutText(in, false)
	if plain[2].Offset != 0x99a000 || TextHash(MachineAMD64, 0, 0x400040, 5, plain, contents) == th.Hash {
		t.Errorf("without spans: %+v", plain)
	}
}
