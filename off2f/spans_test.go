package off2f_test

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/off2f"
)

// A Go program linked with -R 0x200000 (segments on 2 MiB boundaries) is
// converted with 2 MiB spans: FlagHugeSpan, each read-only segment
// 2 MiB-congruent in the text file with filler around it, the header
// segment outside the spans. The loader maps each span whole (the
// program's /proc/self/maps shows it), and the program behaves as its
// original (TestConvertedBehavesLikeOriginal, go-R). The same program
// linked as Go links by default is converted as before, without the flag.
// A text and a note that disagree on the flag, or a flag on a text not laid
// out for it, are refused by the loader and the parser alike.
func TestHugeSpans(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real programs")
	}
	p := testProgs(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	hdr, conv := p.convertInto(t, "go-probe-R", filepath.Join(dir, "bin"), off2f.Options{StoreDir: store})
	n := conv.Note
	if n.Flags&off2f.FlagHugeSpan == 0 {
		t.Fatalf("a -R 0x200000 program converted without FlagHugeSpan: flags %#x", n.Flags)
	}
	if _, err := off2f.ParseText(conv.Text); err != nil {
		t.Fatal(err)
	}
	hf, err := elf.NewFile(bytes.NewReader(conv.Header))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, s := range n.Segments {
		if s.Prot&off2f.ProtWrite != 0 {
			continue
		}
		start, end := s.Vaddr&^(off2f.HugePageSize-1), (s.Vaddr+s.Memsz+off2f.HugePageSize-1)&^(off2f.HugePageSize-1)
		if s.Offset%off2f.HugePageSize != s.Vaddr%off2f.HugePageSize {
			t.Errorf("segment %d: vaddr %#x at offset %#x, not 2 MiB-congruent", i, s.Vaddr, s.Offset)
		}
		fileEnd := s.Offset + (end - s.Vaddr)
		if fileEnd > uint64(len(conv.Text)) {
			t.Fatalf("segment %d: its span ends at offset %#x, past the %d-byte text", i, fileEnd, len(conv.Text))
		}
		if pad := conv.Text[s.Offset+s.Memsz : fileEnd]; len(pad) == 0 || bytes.Count(pad, []byte{0xcc}) != len(pad) {
			t.Errorf("segment %d: its span's %d bytes after it are not all filler (0xcc)", i, len(pad))
		}
		for _, ph := range hf.Progs {
			if ph.Type == elf.PT_LOAD && ph.Vaddr < end && start < ph.Vaddr+ph.Memsz {
				t.Errorf("header file PT_LOAD at %#x lies in segment %d's span [%#x, %#x)", ph.Vaddr, i, start, end)
			}
		}
		perm := "r--p"
		if s.Prot&off2f.ProtExec != 0 {
			perm = "r-xp"
		}
		want = append(want, fmt.Sprintf("map %08x-%08x %s %s", start, end, perm, filepath.Join(store, conv.TextName())))
	}
	got := run(t, hdr, []string{"maps"}, nil)
	for _, w := range want {
		if !strings.Contains(got.Stdout, w+"\n") {
			t.Errorf("no mapping %q in the program's maps:\n%s", w, got.Stdout)
		}
	}

	// Linked as Go links by default: no spans, as before.
	_, plain := p.convertInto(t, "go-probe", filepath.Join(dir, "plain"), off2f.Options{StoreDir: store})
	if plain.Note.Flags&off2f.FlagHugeSpan != 0 {
		t.Errorf("go-probe (Go's default layout) converted with FlagHugeSpan")
	}

	// The text's flag cleared: the header page no longer matches the note.
	text := filepath.Join(store, conv.TextName())
	patch(t, text, 12, []byte{byte(conv.Note.Flags &^ off2f.FlagHugeSpan & off2f.FlagHuge)})
	if o := run(t, hdr, nil, nil); o.Exit != 127 || o.Stderr != "ld-off2f: DIR/go-probe-R: "+text+": text does not match the program (machine, hash or segment table differ)\n" {
		t.Errorf("text without the flag: %+v", o)
	}
	h, err := off2f.ParseHeader(conv.Header)
	if err != nil {
		t.Fatal(err)
	}
	var th off2f.TextHeader
	if err := th.UnmarshalBinary(mustRead(t, text)); err != nil {
		t.Fatal(err)
	}
	if err := h.CheckText(&th); err == nil || !strings.Contains(err.Error(), "2 MiB spans") {
		t.Errorf("CheckText of a text without the note's flag: %v", err)
	}

	// The flag on a text laid out without spans: its segments are not
	// 2 MiB-congruent, nor its file long enough.
	phdr, plainConv := p.convertInto(t, "go-probe", filepath.Join(dir, "flagged"), off2f.Options{StoreDir: store})
	patchNote(t, phdr, 4, []byte{byte(plainConv.Note.Flags | off2f.FlagHugeSpan)})
	if o := run(t, phdr, nil, nil); o.Exit != 127 || o.Stderr != "ld-off2f: DIR/go-probe: bad OFF2F note: bad segment table\n" {
		t.Errorf("flag on a text without spans: %+v", o)
	}
	if _, err := off2f.ParseHeader(mustRead(t, phdr)); !errors.Is(err, off2f.ErrFormat) || !strings.Contains(err.Error(), "2 MiB") {
		t.Errorf("ParseHeader of the flag on a text without spans: %v", err)
	}
}
