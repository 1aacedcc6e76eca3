package off2fcmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/off2f"
)

func inspect(_ context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "inspect", "off2f inspect [-json] FILE",
		`Prints every field of an OFF2F header file (its program headers and the
OFF2F note) or of a text file (its header page and its size), after checking
them as the loader does: a file the loader would refuse is an error (exit 1)
that says why. inspect reads only FILE; use verify to check a header file
against its text and the text's hash.`,
		`  off2f inspect hello.off2f
  off2f inspect -json /nv/text/3f2a...`)
	jsonOut := fs.Bool("json", false, "print the fields as JSON")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("inspect takes one file, got %d", fs.NArg())
	}
	path := fs.Arg(0)
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	if bytes.HasPrefix(raw, off2f.TextMagic[:]) {
		var th off2f.TextHeader
		if err := th.UnmarshalBinary(raw); err != nil {
			return fmt.Errorf("inspect %s: %w", path, err)
		}
		// The loader refuses a text file whose size is not the header's.
		if size := uint64(len(raw)); size != th.Size {
			what := "truncated"
			if size > th.Size {
				what = "longer than its header says"
			}
			return fmt.Errorf("inspect %s: text file is %d bytes, its header says %d: %s (the loader refuses it)", path, size, th.Size, what)
		}
		if *jsonOut {
			return cli.JSON(c.Stdout, textJSON(path, &th))
		}
		printText(c.Stdout, path, &th)
		return nil
	}
	h, err := off2f.ParseHeader(raw)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", path, err)
	}
	if *jsonOut {
		return cli.JSON(c.Stdout, headerJSON(path, h))
	}
	printHeader(c.Stdout, path, h)
	return nil
}

type segmentJSON struct {
	Vaddr  uint64 `json:"vaddr"`
	Memsz  uint64 `json:"memsz"`
	Filesz uint64 `json:"filesz"`
	Offset uint64 `json:"offset"`
	Prot   string `json:"prot"`
	Huge   bool   `json:"huge_aligned"`
}

// segmentsJSON lists segs; huge_aligned says DAX may map the segment with
// 2 MiB entries: 2 MiB-congruent, and 2 MiB or more or (flags has
// FlagHugeSpan) read-only, so mapped in whole 2 MiB pages.
func segmentsJSON(segs []off2f.Segment, flags uint32) []segmentJSON {
	out := make([]segmentJSON, len(segs))
	for i, s := range segs {
		spanned := flags&off2f.FlagHugeSpan != 0 && s.Prot&off2f.ProtWrite == 0
		out[i] = segmentJSON{s.Vaddr, s.Memsz, s.Filesz, s.Offset, protString(s.Prot),
			(s.Memsz >= off2f.HugeMin || spanned) && s.Offset%off2f.HugePageSize == s.Vaddr%off2f.HugePageSize}
	}
	return out
}

func protString(p uint32) string {
	b := []byte("---")
	if p&off2f.ProtRead != 0 {
		b[0] = 'r'
	}
	if p&off2f.ProtWrite != 0 {
		b[1] = 'w'
	}
	if p&off2f.ProtExec != 0 {
		b[2] = 'x'
	}
	return string(b)
}

func flagNames(f uint32) []string {
	names := []string{}
	for _, n := range []struct {
		bit  uint32
		name string
	}{{off2f.FlagPrefault, "prefault"}, {off2f.FlagHuge, "huge"}, {off2f.FlagDyn, "dyn"}, {off2f.FlagCRC, "crc"}, {off2f.FlagHugeSpan, "huge-span"}} {
		if f&n.bit != 0 {
			names = append(names, n.name)
		}
	}
	return names
}

type progJSON struct {
	Type   string `json:"type"`
	Flags  string `json:"flags"`
	Offset uint64 `json:"offset"`
	Vaddr  uint64 `json:"vaddr"`
	Filesz uint64 `json:"filesz"`
	Memsz  uint64 `json:"memsz"`
	Align  uint64 `json:"align"`
}

type noteJSON struct {
	Version     uint16        `json:"version"`
	Machine     string        `json:"machine"`
	Flags       []string      `json:"flags"`
	Hash        string        `json:"hash"`
	TextSize    uint64        `json:"text_size"`
	OrigPhnum   uint32        `json:"orig_phnum"`
	OrigPhdr    uint64        `json:"orig_phdr_vaddr"`
	StoreDir    string        `json:"store_dir"`
	FallbackDir string        `json:"fallback_dir"`
	Device      string        `json:"device"`
	FSType      string        `json:"fstype"`
	Options     string        `json:"mount_options"`
	Segments    []segmentJSON `json:"segments"`
	CRC         string        `json:"crc32c,omitempty"` // with the crc flag: 0x and 8 hex digits
}

func headerJSON(path string, h *off2f.Header) any {
	progs := make([]progJSON, len(h.Progs))
	for i, p := range h.Progs {
		progs[i] = progJSON{p.Type.String(), p.Flags.String(), p.Off, p.Vaddr, p.Filesz, p.Memsz, p.Align}
	}
	n := h.Note
	return struct {
		File   string     `json:"file"`
		Kind   string     `json:"kind"`
		Type   string     `json:"elf_type"`
		Entry  uint64     `json:"entry"`
		Interp string     `json:"interp"`
		Progs  []progJSON `json:"program_headers"`
		Note   noteJSON   `json:"note"`
	}{path, "header", h.Type.String(), h.Entry, h.Interp, progs, noteJSON{
		n.Version, n.Machine.String(), flagNames(n.Flags), off2f.HashName(n.Hash), n.TextSize, n.OrigPhnum, n.OrigPhdr,
		n.StoreDir, n.FallbackDir, n.Device, n.FSType, n.Options, segmentsJSON(n.Segments, n.Flags), crcString(n)}}
}

// crcString is the note's CRC-32C as inspect shows it; "" without one.
func crcString(n off2f.Note) string {
	if n.Flags&off2f.FlagCRC == 0 {
		return ""
	}
	return fmt.Sprintf("0x%08x", n.CRC)
}

func textJSON(path string, th *off2f.TextHeader) any {
	return struct {
		File     string        `json:"file"`
		Kind     string        `json:"kind"`
		Version  uint16        `json:"version"`
		Machine  string        `json:"machine"`
		Flags    []string      `json:"flags"`
		Hash     string        `json:"hash"`
		Size     uint64        `json:"size"`
		Segments []segmentJSON `json:"segments"`
	}{path, "text", th.Version, th.Machine.String(), flagNames(th.Flags), off2f.HashName(th.Hash), th.Size, segmentsJSON(th.Segments, th.Flags)}
}

func printSegments(w io.Writer, segs []off2f.Segment, flags uint32) {
	fmt.Fprintf(w, "  %-18s %-10s %-10s %-10s %-4s %s\n", "vaddr", "memsz", "filesz", "offset", "prot", "2MiB")
	for _, s := range segmentsJSON(segs, flags) {
		huge := ""
		if s.Huge {
			huge = "yes"
		}
		fmt.Fprintf(w, "  %#-18x %#-10x %#-10x %#-10x %-4s %s\n", s.Vaddr, s.Memsz, s.Filesz, s.Offset, s.Prot, huge)
	}
}

func printHeader(w io.Writer, path string, h *off2f.Header) {
	n := h.Note
	fmt.Fprintf(w, "%s: OFF2F header file\n", path)
	fmt.Fprintf(w, "ELF type:        %v\nentry:           %#x\ninterpreter:     %s\n", h.Type, h.Entry, h.Interp)
	fmt.Fprintf(w, "program headers:\n")
	for _, p := range h.Progs {
		fmt.Fprintf(w, "  %-14v %-10v off %#-8x vaddr %#-14x filesz %#-8x memsz %#-8x align %#x\n", p.Type, p.Flags, p.Off, p.Vaddr, p.Filesz, p.Memsz, p.Align)
	}
	fmt.Fprintf(w, "note:\n  version:       %d\n  machine:       %v\n  flags:         %v\n  text hash:     %s\n  text size:     %d\n", n.Version, n.Machine, flagNames(n.Flags), off2f.HashName(n.Hash), n.TextSize)
	fmt.Fprintf(w, "  original phdrs: %d at %#x\n  store:         %s\n  fallback:      %s\n", n.OrigPhnum, n.OrigPhdr, n.StoreDir, orNone(n.FallbackDir))
	if n.Device != "" {
		fmt.Fprintf(w, "  mount:         %s on %s type %s (%s)\n", n.Device, n.StoreDir, n.FSType, n.Options)
	}
	if c := crcString(n); c != "" {
		fmt.Fprintf(w, "  text CRC-32C:  %s (checked by the loader at each start)\n", c)
	}
	fmt.Fprintf(w, "text segments:\n")
	printSegments(w, n.Segments, n.Flags)
}

func printText(w io.Writer, path string, th *off2f.TextHeader) {
	fmt.Fprintf(w, "%s: OFF2F text file\nversion:  %d\nmachine:  %v\nflags:    %v\nhash:     %s\nsize:     %d\nsegments:\n", path, th.Version, th.Machine, flagNames(th.Flags), off2f.HashName(th.Hash), th.Size)
	printSegments(w, th.Segments, th.Flags)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
