package off2f_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/off2f"
)

// loaderCase sets up a converted go-probe, breaks something, and says what the
// loader must print (exactly) or that the program must still run.
type loaderCase struct {
	name     string
	fallback bool
	// breakIt gets the header path, the store path and the fallback path (if any)
	// of the text file, and damages them.
	breakIt func(t *testing.T, header, text, fallback string)
	// want is the loader's exact stderr line, with TEXT, FALLBACK and PROG
	// standing for the paths, SELF for the loader's machine and OTHER for
	// another; empty means the program must run normally.
	want string
}

// belowTextCases depend on the x86-64 header layout: the header segment
// below the text.
var belowTextCases = map[string]bool{"note and text agree on a colliding address": true}

// otherMachine is a machine that is not m.
func otherMachine(m off2f.Machine) off2f.Machine {
	if m == off2f.MachineAMD64 {
		return off2f.MachineARM64
	}
	return off2f.MachineAMD64
}

func TestLoaderFailurePaths(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real programs")
	}
	eachMachine(t, testLoaderFailurePaths)
}

func testLoaderFailurePaths(t *testing.T, m machineProgs) {
	other := otherMachine(m.machine)
	noop := func(*testing.T, string, string, string) {}
	cases := []loaderCase{
		{"intact", false, noop, ""},
		{"missing text", false, func(t *testing.T, h, text, fb string) { mustRemove(t, text) },
			"ld-off2f: PROG: TEXT: cannot open: No such file or directory"},
		{"missing text, fallback used", true, func(t *testing.T, h, text, fb string) { mustRemove(t, text) }, ""},
		{"missing text and fallback", true, func(t *testing.T, h, text, fb string) { mustRemove(t, text); mustRemove(t, fb) },
			"ld-off2f: PROG: TEXT: cannot open: No such file or directory; fallback FALLBACK: cannot open: No such file or directory"},
		{"truncated text", false, func(t *testing.T, h, text, fb string) { truncate(t, text, 8192) },
			"ld-off2f: PROG: TEXT: truncated or wrong size (8192 bytes, want SIZE)"},
		{"truncated text, fallback used", true, func(t *testing.T, h, text, fb string) { truncate(t, text, 100) }, ""},
		{"text of another program", false, func(t *testing.T, h, text, fb string) { patch(t, text, 16, []byte{0xff}) },
			"ld-off2f: PROG: TEXT: text does not match the program (machine, hash or segment table differ)"},
		{"text for another machine", false, func(t *testing.T, h, text, fb string) { patch(t, text, 10, []byte{byte(other)}) },
			"ld-off2f: PROG: TEXT: text does not match the program (machine, hash or segment table differ)"},
		{"header for another machine", true, func(t *testing.T, h, text, fb string) { patchNote(t, h, 2, []byte{byte(other)}) },
			"ld-off2f: PROG: built for OTHER, this loader runs SELF"},
		{"header for an unknown machine", false, func(t *testing.T, h, text, fb string) { patchNote(t, h, 2, []byte{0x7f}) },
			"ld-off2f: PROG: built for an unknown machine, this loader runs SELF"},
		{"not a text file", false, func(t *testing.T, h, text, fb string) { patch(t, text, 0, []byte("GARBAGE!")) },
			"ld-off2f: PROG: TEXT: not an OFF2F text file"},
		{"both copies mismatch", true, func(t *testing.T, h, text, fb string) {
			patch(t, text, 20, []byte{1})
			patch(t, fb, 0, []byte("X"))
		}, "ld-off2f: PROG: TEXT: text does not match the program (machine, hash or segment table differ); fallback FALLBACK: not an OFF2F text file"},
		{"store is a file", false, func(t *testing.T, h, text, fb string) {
			dir := filepath.Dir(text)
			mustRemove(t, text)
			mustRemove(t, dir)
			if err := os.WriteFile(dir, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "ld-off2f: PROG: TEXT: cannot open: Not a directory"},
		{"corrupt note version", false, func(t *testing.T, h, text, fb string) { patchNote(t, h, 0, []byte{9}) },
			"ld-off2f: PROG: bad OFF2F note: unsupported version"},
		{"corrupt note segment count", false, func(t *testing.T, h, text, fb string) { patchNote(t, h, 48, []byte{0xee}) },
			"ld-off2f: PROG: bad OFF2F note: bad segment count"},
		{"corrupt note store path", false, func(t *testing.T, h, text, fb string) { patchNote(t, h, 64, []byte{'x'}) },
			"ld-off2f: PROG: bad OFF2F note: bad path field"},
		{"corrupt note segment table", false, func(t *testing.T, h, text, fb string) { patchNote(t, h, 448+32, []byte{7}) },
			"ld-off2f: PROG: bad OFF2F note: bad segment table"},
		{"corrupt original phdr count", false, func(t *testing.T, h, text, fb string) { patchNote(t, h, 52, []byte{0, 0, 1}) },
			"ld-off2f: PROG: bad OFF2F note: original program headers outside the text"},
		{"note and text agree on a colliding address", false, func(t *testing.T, h, text, fb string) {
			// Move text segment 0 onto the header segment in both files: all checks
			// pass, and MAP_FIXED_NOREPLACE must refuse to overwrite the mapping.
			hb := mustRead(t, h)
			hdrVaddr := loadVaddrs(t, hb)[0]
			var v [8]byte
			binary.LittleEndian.PutUint64(v[:], hdrVaddr)
			patchNote(t, h, 448, v[:])
			patch(t, text, 80, v[:])
		}, "ld-off2f: PROG: TEXT: cannot map text segment at HDR: File exists"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if belowTextCases[tc.name] && m.machine != off2f.MachineAMD64 {
				t.Skipf("the header segment of an %v program is not below its text", m.machine)
			}
			dir := t.TempDir()
			opt := off2f.Options{StoreDir: filepath.Join(dir, "store")}
			fb := ""
			if tc.fallback {
				opt.FallbackDir = filepath.Join(dir, "fallback")
			}
			hdr, conv := m.convertInto(t, "go-probe", filepath.Join(dir, "bin"), opt)
			text := filepath.Join(opt.StoreDir, conv.TextName())
			if tc.fallback {
				fb = filepath.Join(opt.FallbackDir, conv.TextName())
				os.MkdirAll(opt.FallbackDir, 0o755)
				if _, err := (off2f.Store{Dir: opt.FallbackDir}).Put(conv.TextName(), conv.Text); err != nil {
					t.Fatal(err)
				}
			}
			tc.breakIt(t, hdr, text, fb)
			got := m.run(t, hdr, []string{"ok"}, nil)
			if tc.want == "" {
				if got.Exit != 0 || !strings.Contains(got.Stdout, `args=["go-probe" "ok"]`) {
					t.Fatalf("program did not run normally: %+v", got)
				}
				return
			}
			want := strings.NewReplacer("PROG", hdr, "TEXT", text, "FALLBACK", fb, "SELF", m.machine.String(), "OTHER", other.String(),
				"SIZE", fmt.Sprint(len(conv.Text)), "HDR", fmt.Sprintf("%#x", firstLoad(t, hdr))).Replace(tc.want)
			want = strings.ReplaceAll(want, filepath.Dir(hdr), "DIR")
			if got.Exit != 127 || got.Stdout != "" || got.Stderr != want+"\n" {
				t.Fatalf("got exit %d signal %q stdout %q stderr:\n%q\nwant exit 127 and stderr:\n%q", got.Exit, got.Signal, got.Stdout, got.Stderr, want+"\n")
			}
		})
	}
}

func TestLoaderRunDirectly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the loader")
	}
	eachMachine(t, func(t *testing.T, m machineProgs) {
		got := m.run(t, m.loader, nil, nil)
		if got.Exit != 127 || !strings.Contains(got.Stderr, "run ld-off2f through an OFF2F program, not directly") {
			t.Fatalf("got %+v", got)
		}
	})
}

// The loader is a static-pie for its machine, with no interpreter and no
// relocations (it runs before anything could apply them), under 16 KiB.
func TestLoaderIsSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the loader")
	}
	eachMachine(t, func(t *testing.T, m machineProgs) {
		st, err := os.Stat(m.loader)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 16<<10 {
			t.Errorf("ld-off2f is %d bytes, the aim is under 16 KiB", st.Size())
		}
		f, err := elf.Open(m.loader)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, pr := range f.Progs {
			if pr.Type == elf.PT_INTERP {
				t.Error("ld-off2f has an interpreter of its own")
			}
		}
		if f.Type != elf.ET_DYN {
			t.Errorf("ld-off2f is %v, want a static-pie (ET_DYN)", f.Type)
		}
		if f.Machine != m.machine.ELF() {
			t.Errorf("ld-off2f is built for %v, want %v", f.Machine, m.machine.ELF())
		}
		for _, tag := range []elf.DynTag{elf.DT_RELASZ, elf.DT_RELSZ} {
			if v, err := f.DynValue(tag); err == nil && len(v) > 0 && v[0] != 0 {
				t.Errorf("ld-off2f has relocations: %v = %d", tag, v[0])
			}
		}
	})
}

// Random damage to the note must make the loader refuse (exit 127 with its
// one-line message) or run the program correctly; never crash or run anything
// else. The text header page's comparison with the note is what guarantees it.
func TestLoaderSurvivesCorruptNotes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real programs")
	}
	p := testProgs(t)
	dir := t.TempDir()
	hdr, _ := p.convertInto(t, "go-probe", filepath.Join(dir, "bin"), off2f.Options{StoreDir: filepath.Join(dir, "store")})
	orig := mustRead(t, hdr)
	noteOff, noteLen := noteDesc(t, orig)
	rng := rand.New(rand.NewSource(1))
	refused, ran := 0, 0
	for i := 0; i < 150; i++ {
		b := bytes.Clone(orig)
		for n := 1 + rng.Intn(3); n > 0; n-- {
			b[noteOff+rng.Intn(noteLen)] ^= byte(1 << rng.Intn(8))
		}
		if err := os.WriteFile(hdr, b, 0o755); err != nil {
			t.Fatal(err)
		}
		got := run(t, hdr, []string{"ok"}, nil)
		switch {
		case got.Signal != "":
			t.Fatalf("iteration %d: killed by %s; stderr %q", i, got.Signal, got.Stderr)
		case got.Exit == 127 && strings.HasPrefix(got.Stderr, "ld-off2f: ") && strings.Count(got.Stderr, "\n") == 1:
			refused++
		case got.Exit == 0 && strings.Contains(got.Stdout, "goroutines_sum=42673008000"):
			ran++ // e.g. the prefault bit or the fallback path changed
		default:
			t.Fatalf("iteration %d: unexpected outcome %+v", i, got)
		}
	}
	if refused == 0 {
		t.Fatal("no corruption was refused: the test did not corrupt anything")
	}
	t.Logf("refused %d, ran correctly %d", refused, ran)
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	defer writable(t, path)()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	defer writable(t, path)()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// writable makes path writable by its owner until the returned func restores it.
func writable(t *testing.T, path string) func() {
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, st.Mode()|0o200)
	return func() { os.Chmod(path, st.Mode()) }
}

// noteDesc finds the OFF2F note descriptor in a header file.
func noteDesc(t *testing.T, raw []byte) (off, size int) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range f.Progs {
		if pr.Type == elf.PT_NOTE {
			namesz := binary.LittleEndian.Uint32(raw[pr.Off:])
			descsz := binary.LittleEndian.Uint32(raw[pr.Off+4:])
			return int(pr.Off) + 12 + int((namesz+3)&^3), int(descsz)
		}
	}
	t.Fatal("no note")
	return 0, 0
}

func patchNote(t *testing.T, header string, off int, b []byte) {
	t.Helper()
	noteOff, _ := noteDesc(t, mustRead(t, header))
	patch(t, header, int64(noteOff+off), b)
}

func loadVaddrs(t *testing.T, raw []byte) []uint64 {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var v []uint64
	for _, pr := range f.Progs {
		if pr.Type == elf.PT_LOAD {
			v = append(v, pr.Vaddr)
		}
	}
	return v
}

func firstLoad(t *testing.T, header string) uint64 { return loadVaddrs(t, mustRead(t, header))[0] }
