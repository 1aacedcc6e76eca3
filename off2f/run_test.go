package off2f_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/off2f"
)

var staticInputs = []string{"go-probe", "go-probe-R", "go-probe-pie", "c-static", "c-static-pie", "busybox", "tiny"}

// pair places the original as A/<file> and the converted program as B/<file>,
// so the only difference between the runs is the directory, which run() hides.
func pair(t *testing.T, p *progs, name, file string, opt off2f.Options) (orig, conv string) {
	t.Helper()
	base := t.TempDir()
	a, b := filepath.Join(base, "A"), filepath.Join(base, "B")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(p.bins[name])
	if err != nil {
		t.Fatal(err)
	}
	orig = filepath.Join(a, file)
	if err := os.WriteFile(orig, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	hdr, _ := p.convertInto(t, name, b, opt)
	conv = filepath.Join(b, file)
	if hdr != conv {
		if err := os.Rename(hdr, conv); err != nil {
			t.Fatal(err)
		}
	}
	return orig, conv
}

func runAs(t *testing.T, r runner, path, argv0 string, args, env []string) outcome {
	t.Helper()
	link := filepath.Join(filepath.Dir(path), argv0)
	if argv0 != filepath.Base(path) {
		if err := os.Symlink(filepath.Base(path), link); err != nil && !errors.Is(err, os.ErrExist) {
			t.Fatal(err)
		}
	}
	return r.run(t, link, args, env)
}

// needProg skips t when the machine has no such test program (aarch64 has
// no busybox, and its static-pies do not run under qemu-user: see
// arm64NotRun).
func needProg(t *testing.T, m machineProgs, prog string) {
	t.Helper()
	if _, ok := m.bins[prog]; !ok {
		t.Skipf("no %s test program for %v", prog, m.machine)
	}
	if why, ok := arm64NotRun[prog]; ok && m.machine == off2f.MachineARM64 {
		t.Skipf("%s: %s", prog, why)
	}
}

// arm64NotRun are the aarch64 programs converted and checked but not run:
// qemu-user loads a static-pie at its link-time address when that is free
// (Linux puts it at ELF_ET_DYN_BASE), so the loader would have to map its
// text at address 0.
var arm64NotRun = map[string]string{
	"c-static-pie": "a static-pie's header file does not run under qemu-user (its text would go at address 0)",
}

func TestConvertedBehavesLikeOriginal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real programs")
	}
	eachMachine(t, testConvertedBehavesLikeOriginal)
}

func testConvertedBehavesLikeOriginal(t *testing.T, m machineProgs) {
	env := []string{"PROBE_B=2", "PROBE_A=1 with spaces", "PATH=/usr/bin:/bin"}
	cases := []struct {
		name, prog, argv0 string
		args              []string
	}{
		{"go/plain", "go-probe", "probe", nil},
		{"go/args", "go-probe", "probe", []string{"a", "b c", ""}},
		{"go/exit", "go-probe", "probe", []string{"exit=3"}},
		{"go/killed", "go-probe", "probe", []string{"kill"}},
		{"go/panic", "go-probe", "probe", []string{"panic"}},
		{"go-R/args", "go-probe-R", "probe", []string{"a", "exit=4"}},
		{"go-pie/args", "go-probe-pie", "probe", []string{"x", "exit=9"}},
		{"go-pie/killed", "go-probe-pie", "probe", []string{"kill"}},
		{"c-static", "c-static", "phdrs", []string{"one", "two"}},
		{"c-static-pie", "c-static-pie", "phdrs", []string{"one"}},
		{"busybox/echo", "busybox", "echo", []string{"hello", "world"}},
		{"busybox/sh", "busybox", "sh", []string{"-c", `echo "$PROBE_A"; printf '%s\n' a b | wc -l; exit 5`}},
		{"busybox/expr", "busybox", "busybox", []string{"expr", "6", "*", "7"}},
		{"busybox/sha256", "busybox", "sha256sum", []string{"/etc/hostname"}},
		{"tiny", "tiny", "tiny", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			needProg(t, m, tc.prog)
			file := tc.argv0
			if tc.prog == "busybox" {
				file = "busybox"
			}
			orig, conv := pair(t, m.progs, tc.prog, file, off2f.Options{})
			want := runAs(t, m.runner, orig, tc.argv0, tc.args, env)
			got := runAs(t, m.runner, conv, tc.argv0, tc.args, env)
			if got != want {
				t.Errorf("converted program differs\n got: %+v\nwant: %+v", got, want)
			}
			if want.Stdout == "" && want.Signal == "" && tc.prog != "tiny" {
				t.Errorf("original printed nothing; the comparison proves little: %+v", want)
			}
		})
	}
}

// The C probe prints the program headers glibc sees: the converted program must
// see its original table (text PT_LOADs, PT_TLS, PT_GNU_EH_FRAME), which the
// loader presents through AT_PHDR.
func TestConvertedSeesOriginalProgramHeaders(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real programs")
	}
	eachMachine(t, func(t *testing.T, m machineProgs) {
		for _, name := range []string{"c-static", "c-static-pie"} {
			t.Run(name, func(t *testing.T) {
				needProg(t, m, name)
				seesOriginalProgramHeaders(t, m, name)
			})
		}
	})
}

func seesOriginalProgramHeaders(t *testing.T, m machineProgs, name string) {
	_, conv := pair(t, m.progs, name, "phdrs", off2f.Options{})
	out := runAs(t, m.runner, conv, "phdrs", nil, nil)
	f, err := elf.Open(m.bins[name])
	if err != nil {
		t.Fatal(err)
	}
	count := map[elf.ProgType]int{}
	for _, pr := range f.Progs {
		count[pr.Type]++
	}
	want := "object phnum=" + strconv.Itoa(len(f.Progs)) + " loads=" + strconv.Itoa(count[elf.PT_LOAD]) +
		" tls=1 eh_frame_hdr=" + strconv.Itoa(count[elf.PT_GNU_EH_FRAME])
	if !strings.Contains(out.Stdout, want) || !strings.Contains(out.Stdout, "at_random=set") {
		t.Errorf("%s: want %q in output, got:\n%s", name, want, out.Stdout)
	}
}

func TestPrefaultRunsIdentically(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real programs")
	}
	eachMachine(t, func(t *testing.T, m machineProgs) {
		orig, conv := pair(t, m.progs, "go-probe", "probe", off2f.Options{Prefault: true})
		h, err := off2f.ParseHeader(mustRead(t, conv))
		if err != nil || h.Note.Flags&off2f.FlagPrefault == 0 {
			t.Fatalf("prefault flag not in note: %v %+v", err, h)
		}
		if got, want := runAs(t, m.runner, conv, "probe", []string{"q"}, nil), runAs(t, m.runner, orig, "probe", []string{"q"}, nil); got != want {
			t.Errorf("prefaulted program differs\n got: %+v\nwant: %+v", got, want)
		}
	})
}

func TestRejectsDynamicAndOtherInputs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds real programs")
	}
	p := testProgs(t)
	hdr, _ := p.convertInto(t, "go-probe", t.TempDir(), off2f.Options{})
	cases := []struct {
		name string
		raw  []byte
		want string
	}{
		{"dynamic", mustRead(t, p.bins["c-dynamic"]), "dynamically linked"},
		{"already converted", mustRead(t, hdr), "already an OFF2F header file"},
		{"text", []byte("#!/bin/sh\necho hi\n"), "not an ELF file"},
		{"empty", nil, "not an ELF file"},
		{"truncated", mustRead(t, p.bins["c-static"])[:3000], "truncated"},
		{"other machine", withMachine(mustRead(t, p.bins["go-probe"]), elf.EM_RISCV), "machine EM_RISCV; OFF2F converts x86-64 (EM_X86_64) and aarch64 (EM_AARCH64) programs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := off2f.Convert(tc.raw, off2f.Options{})
			if !errors.Is(err, off2f.ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrUnsupported containing %q", err, tc.want)
			}
		})
	}
}

// unpack must give back every loadable segment byte for byte, and a program
// that runs like the original.
func TestUnpackRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("builds real programs")
	}
	eachMachine(t, func(t *testing.T, m machineProgs) {
		for _, name := range staticInputs {
			if _, ok := m.bins[name]; ok {
				t.Run(name, func(t *testing.T) { unpackRoundTrip(t, m, name) })
			}
		}
	})
}

func unpackRoundTrip(t *testing.T, m machineProgs, name string) {
	raw := mustRead(t, m.bins[name])
	conv, err := off2f.Convert(raw, off2f.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := off2f.Unpack(conv.Header, conv.Text)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, pr := range f.Progs {
		if pr.Type != elf.PT_LOAD {
			continue
		}
		n++
		end := pr.Off + pr.Filesz
		if end > uint64(len(got)) || !bytes.Equal(got[pr.Off:end], raw[pr.Off:end]) {
			t.Errorf("segment at offset %#x (vaddr %#x) differs after unpack", pr.Off, pr.Vaddr)
		}
	}
	if n < 2 {
		t.Fatalf("only %d loadable segments compared", n)
	}
	if name == "go-probe" {
		dir := t.TempDir()
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		os.Mkdir(a, 0o755)
		os.Mkdir(b, 0o755)
		os.WriteFile(filepath.Join(a, "probe"), raw, 0o755)
		os.WriteFile(filepath.Join(b, "probe"), got, 0o755)
		if o1, o2 := runAs(t, m.runner, filepath.Join(a, "probe"), "probe", []string{"z"}, nil), runAs(t, m.runner, filepath.Join(b, "probe"), "probe", []string{"z"}, nil); o1 != o2 {
			t.Errorf("unpacked program differs\n got: %+v\nwant: %+v", o2, o1)
		}
	}
}

func TestIdenticalTextStoredOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds real programs")
	}
	p := testProgs(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	_, c1 := p.convertInto(t, "go-probe", filepath.Join(dir, "one"), off2f.Options{StoreDir: store})
	os.MkdirAll(filepath.Join(dir, "two"), 0o755)
	_, c2 := p.convertInto(t, "go-probe", filepath.Join(dir, "two"), off2f.Options{StoreDir: store, Prefault: true})
	if c1.TextName() != c2.TextName() {
		t.Fatalf("same program, different text names %s %s", c1.TextName(), c2.TextName())
	}
	written, err := off2f.Store{Dir: store}.Put(c2.TextName(), c2.Text)
	if err != nil || written {
		t.Fatalf("second Put of identical text: written=%v err=%v", written, err)
	}
	entries, _ := off2f.Store{Dir: store}.List()
	if len(entries) != 1 {
		t.Fatalf("store has %d entries, want 1", len(entries))
	}
}

// withMachine is the ELF file raw with its e_machine set to m.
func withMachine(raw []byte, m elf.Machine) []byte {
	b := bytes.Clone(raw)
	binary.LittleEndian.PutUint16(b[18:], uint16(m))
	return b
}

// Options.Arch refuses a program of another machine, naming both, and
// converts one of its own.
func TestConvertRefusesOtherArch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds real programs")
	}
	raw := mustRead(t, testProgs(t).bins["go-probe"])
	if _, err := off2f.Convert(raw, off2f.Options{Arch: "amd64"}); err != nil {
		t.Fatalf("amd64 program for amd64: %v", err)
	}
	for _, tc := range []struct {
		raw        []byte
		arch, want string
	}{
		{raw, "arm64", "built for x86-64 (GOARCH amd64), not aarch64 (GOARCH arm64)"},
		{withMachine(raw, elf.EM_AARCH64), "amd64", "built for aarch64 (GOARCH arm64), not x86-64 (GOARCH amd64)"},
		{raw, "riscv64", `GOARCH "riscv64"`},
	} {
		if _, err := off2f.Convert(tc.raw, off2f.Options{Arch: tc.arch}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("for %s: %v, want %q", tc.arch, err, tc.want)
		}
	}
}

// A header file whose ELF machine is not its note's is refused: the kernel
// would start it as the one, the loader map text for the other.
func TestHeaderMachineAgreesWithNote(t *testing.T) {
	if testing.Short() {
		t.Skip("builds real programs")
	}
	p := testProgs(t)
	conv, err := off2f.Convert(mustRead(t, p.bins["go-probe"]), off2f.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if conv.Note.Machine != off2f.MachineAMD64 {
		t.Errorf("note machine %v, want x86-64", conv.Note.Machine)
	}
	if _, err := off2f.ParseHeader(conv.Header); err != nil {
		t.Fatal(err)
	}
	_, err = off2f.ParseHeader(withMachine(conv.Header, elf.EM_AARCH64))
	if !errors.Is(err, off2f.ErrFormat) || !strings.Contains(err.Error(), "ELF machine EM_AARCH64 disagrees with the note's x86-64") {
		t.Fatalf("got %v", err)
	}
	th, err := off2f.ParseText(conv.Text)
	if err != nil {
		t.Fatal(err)
	}
	th.Machine = off2f.MachineARM64
	h, _ := off2f.ParseHeader(conv.Header)
	if err := h.CheckText(th); err == nil || !strings.Contains(err.Error(), "text is built for aarch64, the note for x86-64") {
		t.Fatalf("CheckText of another machine's text: %v", err)
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A Go program's writable data goes into the text file as its last
// segment (rw-), and the header file keeps only its size: the loader maps
// the image copy-on-write over the kernel's anonymous memory. The program
// runs as the original does, writes to its globals stay its own (the text
// file is unchanged after two runs). A static-pie, whose PT_DYNAMIC and
// RELRO lie in its data, and a C program, whose data starts mid-page, keep
// their data in the header file.
func TestDataImageInText(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real programs")
	}
	eachMachine(t, testDataImageInText)
}

func testDataImageInText(t *testing.T, m machineProgs) {
	for _, c := range []struct {
		prog   string
		inText bool
	}{{"go-probe", true}, {"go-probe-pie", false}, {"c-static", false}, {"c-static-pie", false}} {
		if _, ok := m.bins[c.prog]; !ok {
			continue
		}
		dir := t.TempDir()
		hdr, conv := m.convertInto(t, c.prog, dir, off2f.Options{})
		last := conv.Note.Segments[len(conv.Note.Segments)-1]
		if got := last.Prot == off2f.ProtRead|off2f.ProtWrite; got != c.inText {
			t.Errorf("%s: data in the text file %v, want %v (segments %+v)", c.prog, got, c.inText, conv.Note.Segments)
		}
		h, err := off2f.ParseHeader(mustRead(t, hdr))
		if err != nil {
			t.Fatal(err)
		}
		for _, ph := range h.Progs {
			if ph.Type == elf.PT_LOAD && ph.Flags&elf.PF_W != 0 && (ph.Filesz == 0) != c.inText {
				t.Errorf("%s: header's writable segment has %d file bytes", c.prog, ph.Filesz)
			}
		}
		textPath := filepath.Join(dir, "store", conv.TextName())
		before := mustRead(t, textPath)
		if strings.HasPrefix(c.prog, "go-") {
			for range 2 {
				if out := m.run(t, hdr, []string{"exit=0"}, nil); out.Exit != 0 || !strings.Contains(out.Stdout, "args=") {
					t.Fatalf("%s: %+v", c.prog, out)
				}
			}
		}
		if !bytes.Equal(before, mustRead(t, textPath)) {
			t.Errorf("%s: running it changed its text file", c.prog)
		}
		if _, err := off2f.Unpack(mustRead(t, hdr), before); err != nil {
			t.Errorf("%s: unpack: %v", c.prog, err)
		}
	}
}
