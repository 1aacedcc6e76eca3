package off2f_test

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/off2f"
)

// The loader's CRC-32C (loader/crc32c.h, run by the crc32c program) agrees
// with Go's hash/crc32 Castagnoli on every length around the loops'
// strides, every start alignment and data continued over chunks (the
// loader's segments), with the CPU's instruction and with the table; on
// x86-64 a CPU without SSE4.2 (qemu64 under qemu-user) gets the table.
func TestLoaderCRC32C(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real programs")
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	rng := rand.New(rand.NewPCG(3, 2))
	data := make([]byte, 1<<20+77)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	type tc struct {
		n, skip int
		chunks  []int
	}
	var cases []tc
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 127, 200, 255, 256, 257, 520, 4096 + 5, 1 << 20} {
		for skip := 0; skip < 8; skip += 3 {
			cases = append(cases, tc{n: n, skip: skip})
		}
	}
	for i := 0; i < 12; i++ {
		c := tc{n: 1000 + rng.IntN(200000), skip: rng.IntN(8)}
		for left := c.n; left > 0 && len(c.chunks) < 5; {
			k := rng.IntN(left + 1)
			c.chunks, left = append(c.chunks, k), left-k
		}
		cases = append(cases, c)
	}
	eachMachine(t, func(t *testing.T, m machineProgs) {
		for _, mode := range []string{"hw", "sw"} {
			t.Run(mode, func(t *testing.T) {
				for _, c := range cases {
					in := data[:c.skip+c.n]
					want := crc32.Update(0, tab, in[c.skip:])
					args := []string{mode, strconv.Itoa(c.skip)}
					for _, k := range c.chunks {
						args = append(args, strconv.Itoa(k))
					}
					got := runCRC(t, m.runner, nil, m.bins["crc32c"], in, args...)
					if got == "nohw\n" {
						t.Skipf("this %v CPU has no CRC-32C instruction", m.machine)
					}
					if w := fmt.Sprintf("%s %08x\n", mode, want); got != w {
						t.Fatalf("%d bytes from offset %d in chunks %v: loader's CRC-32C %q, Go's %q", c.n, c.skip, c.chunks, got, w)
					}
				}
			})
		}
	})
	t.Run("amd64/no-sse4.2", func(t *testing.T) {
		q := qemuX86(t)
		p := testProgs(t)
		in := data[:100000]
		env := []string{"QEMU_CPU=qemu64"}
		if got := runCRC(t, runner{qemu: q}, env, p.bins["crc32c"], in, "hw", "0"); got != "nohw\n" {
			t.Fatalf("on a CPU without SSE4.2 the loader's CRC-32C would use the instruction: %q", got)
		}
		want := fmt.Sprintf("sw %08x\n", crc32.Update(0, tab, in))
		if got := runCRC(t, runner{qemu: q}, env, p.bins["crc32c"], in, "sw", "0"); got != want {
			t.Fatalf("table CRC-32C on qemu64: %q, want %q", got, want)
		}
	})
}

// qemuX86 is qemu-user for x86-64, which runs the host's programs on a CPU
// model without SSE4.2 (QEMU_CPU=qemu64); it skips t without it.
func qemuX86(t *testing.T) string {
	t.Helper()
	q, err := exec.LookPath("qemu-x86_64-static")
	if err != nil {
		t.Skip("an x86-64 CPU without SSE4.2 needs qemu-x86_64-static (Debian: apt-get install qemu-user-static)")
	}
	return q
}

// runCRC runs the crc32c program on in and returns its output.
func runCRC(t *testing.T, r runner, env []string, prog string, in []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command(prog, args...)
	if r.qemu != "" {
		cmd = exec.Command(r.qemu, append([]string{prog}, args...)...)
	}
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("crc32c %v: %v", args, err)
	}
	return string(out)
}

// A program converted with Options.CRC runs when its text is intact; with
// one bit of any segment flipped the loader refuses the text, naming the
// CRC it computed (which must be Go's of the damaged bytes) and the
// note's, and runs the fallback copy, telling the program why
// (OFF2F_FALLBACK); with the fallback damaged too, or none, it exits 127
// naming both. (The x86-64 loader does not run under qemu-user, which
// reserves the header file's whole span, text included: the table it uses
// without SSE4.2 is TestLoaderCRC32C's.)
func TestLoaderChecksCRC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real programs")
	}
	eachMachine(t, testLoaderChecksCRC)
}

func testLoaderChecksCRC(t *testing.T, m machineProgs) {
	var env []string
	dir := t.TempDir()
	opt := off2f.Options{StoreDir: filepath.Join(dir, "store"), FallbackDir: filepath.Join(dir, "fallback"), CRC: true}
	hdr, conv := m.convertInto(t, "go-probe", filepath.Join(dir, "bin"), opt)
	if conv.Note.Flags&off2f.FlagCRC == 0 || conv.Note.CRC != crc32.Update(0, crc32.MakeTable(crc32.Castagnoli), segBytes(conv.Text, conv.Note.Segments)) {
		t.Fatalf("note: flags %#x CRC %#x: want FlagCRC and Go's CRC-32C of the segments", conv.Note.Flags, conv.Note.CRC)
	}
	text := filepath.Join(opt.StoreDir, conv.TextName())
	fb := filepath.Join(opt.FallbackDir, conv.TextName())
	if err := os.MkdirAll(opt.FallbackDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := (off2f.Store{Dir: opt.FallbackDir}).Put(conv.TextName(), conv.Text); err != nil {
		t.Fatal(err)
	}
	runs := func(t *testing.T) outcome {
		t.Helper()
		got := m.run(t, hdr, []string{"ok"}, env)
		if got.Exit != 0 || !strings.Contains(got.Stdout, `args=["go-probe" "ok"]`) {
			t.Fatalf("program did not run: %+v", got)
		}
		return got
	}
	if got := runs(t); strings.Contains(got.Stdout, "off2f_fallback") {
		t.Fatalf("intact text: the loader said it fell back: %q", got.Stdout)
	}
	// Damaged is what the loader says of text with the bytes of text.
	damaged := func(path string, b []byte) string {
		return fmt.Sprintf("%s: damaged: CRC-32C of its segments is %#x, the note's %#x",
			path, crc32.Update(0, crc32.MakeTable(crc32.Castagnoli), segBytes(b, conv.Note.Segments)), conv.Note.CRC)
	}
	for i, s := range conv.Note.Segments {
		for _, at := range []uint64{0, s.Memsz / 2, s.Memsz - 1} {
			t.Run(fmt.Sprintf("segment %d byte %#x", i, at), func(t *testing.T) {
				b := bytes.Clone(conv.Text)
				b[s.Offset+at] ^= 0x10
				writeText(t, text, b)
				defer writeText(t, text, conv.Text)
				got := runs(t)
				if want := "off2f_fallback=" + damaged(text, b) + "\n"; !strings.Contains(got.Stdout, want) {
					t.Fatalf("stdout %q\nwant the line %q", got.Stdout, want)
				}
			})
		}
	}
	t.Run("both damaged", func(t *testing.T) {
		s := conv.Note.Segments[0]
		b, f := bytes.Clone(conv.Text), bytes.Clone(conv.Text)
		b[s.Offset] ^= 1
		f[s.Offset+s.Memsz-1] ^= 0x80
		writeText(t, text, b)
		writeText(t, fb, f)
		defer writeText(t, text, conv.Text)
		defer writeText(t, fb, conv.Text)
		got := m.run(t, hdr, nil, env)
		want := "ld-off2f: " + hdr + ": " + damaged(text, b) + "; fallback " + damaged(fb, f) + "\n"
		if got.Exit != 127 || got.Stdout != "" || got.Stderr != strings.ReplaceAll(want, filepath.Dir(hdr), "DIR") {
			t.Fatalf("got %+v\nwant exit 127 and stderr %q", got, want)
		}
	})
	t.Run("no fallback", func(t *testing.T) {
		hdr2, conv2 := m.convertInto(t, "go-probe", filepath.Join(dir, "bin2"), off2f.Options{StoreDir: opt.StoreDir, CRC: true})
		b := bytes.Clone(conv2.Text)
		b[len(b)/2] ^= 4
		if bytes.Equal(segBytes(b, conv2.Note.Segments), segBytes(conv2.Text, conv2.Note.Segments)) {
			t.Fatal("the flipped byte is padding: pick another")
		}
		writeText(t, text, b)
		defer writeText(t, text, conv2.Text)
		got := m.run(t, hdr2, nil, env)
		want := "ld-off2f: " + hdr2 + ": " + damaged(text, b) + "\n"
		if got.Exit != 127 || got.Stderr != strings.ReplaceAll(want, filepath.Dir(hdr2), "DIR") {
			t.Fatalf("got %+v\nwant exit 127 and stderr %q", got, want)
		}
	})
	t.Run("reserved after the CRC", func(t *testing.T) {
		h := filepath.Join(dir, "bin", "go-probe")
		raw := mustRead(t, h)
		defer os.WriteFile(h, raw, 0o755)
		_, size := noteDesc(t, raw)
		patchNote(t, h, size-1, []byte{1})
		if _, err := off2f.ParseHeader(mustRead(t, h)); err == nil || !strings.Contains(err.Error(), "reserved field after the CRC") {
			t.Errorf("ParseHeader of a note with its reserved word set: %v", err)
		}
		got := m.run(t, h, nil, env)
		if got.Exit != 127 || got.Stderr != "ld-off2f: DIR/go-probe: bad OFF2F note: reserved field after the CRC is not zero\n" {
			t.Fatalf("got %+v", got)
		}
	})
}

// A program run from its fallback copy after its store's copy failed runs
// as its original does, and sees why in OFF2F_FALLBACK: the loader moved
// its arguments, environment and auxiliary vector down to add the
// variable. Go ET_EXEC and static-pie, glibc's static and static-pie (TLS,
// AT_PHDR and AT_RANDOM still right), busybox's shell reading the
// variable, a libc-less program.
func TestFallbackRunsLikeOriginal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real programs")
	}
	eachMachine(t, func(t *testing.T, m machineProgs) {
		env := []string{"PROBE_B=2", "PATH=/usr/bin:/bin"}
		for _, tc := range []struct {
			name, prog, argv0 string
			args              []string
		}{
			{"go", "go-probe", "probe", []string{"a", "exit=3"}},
			{"go-pie", "go-probe-pie", "probe", []string{"x"}},
			{"c-static", "c-static", "phdrs", []string{"one", "two"}},
			{"c-static-pie", "c-static-pie", "phdrs", []string{"one"}},
			{"busybox", "busybox", "sh", []string{"-c", `echo "$PROBE_B"; env | grep -c ^OFF2F_FALLBACK=; exit 4`}},
			{"tiny", "tiny", "tiny", nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				needProg(t, m, tc.prog)
				file := tc.argv0
				if tc.prog == "busybox" {
					file = "busybox"
				}
				fbDir := filepath.Join(t.TempDir(), "fallback")
				orig, conv := pair(t, m.progs, tc.prog, file, off2f.Options{FallbackDir: fbDir})
				h, err := off2f.ParseHeader(mustRead(t, conv))
				if err != nil {
					t.Fatal(err)
				}
				name := off2f.HashName(h.Note.Hash)
				text := filepath.Join(h.Note.StoreDir, name)
				if err := os.MkdirAll(fbDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(text, filepath.Join(fbDir, name)); err != nil {
					t.Fatal(err)
				}
				want := runAs(t, m.runner, orig, tc.argv0, tc.args, env)
				got := runAs(t, m.runner, conv, tc.argv0, tc.args, env)
				why := strings.ReplaceAll(text, filepath.Dir(conv), "DIR") + ": cannot open: No such file or directory"
				switch tc.prog {
				case "go-probe", "go-probe-pie":
					line := "off2f_fallback=" + why + "\n"
					if !strings.Contains(got.Stdout, line) {
						t.Fatalf("stdout %q\nwant the line %q", got.Stdout, line)
					}
					got.Stdout = strings.Replace(got.Stdout, line, "", 1)
				case "busybox":
					if !strings.Contains(got.Stdout, "\n1\n") {
						t.Fatalf("the shell does not see OFF2F_FALLBACK once: %q", got.Stdout)
					}
					got.Stdout = strings.Replace(got.Stdout, "\n1\n", "\n0\n", 1)
				}
				if got != want {
					t.Errorf("run from the fallback copy, the program differs\n got: %+v\nwant: %+v", got, want)
				}
			})
		}
	})
}

// segBytes is the segments' bytes of the text file b, in order, as one
// slice: what TextCRC covers.
func segBytes(b []byte, segs []off2f.Segment) []byte {
	var out []byte
	for _, s := range segs {
		out = append(out, b[s.Offset:s.Offset+s.Memsz]...)
	}
	return out
}

// writeText replaces the text file path with b (mode 0444, as in a store).
func writeText(t *testing.T, path string, b []byte) {
	t.Helper()
	os.Remove(path)
	if err := os.WriteFile(path, b, 0o444); err != nil {
		t.Fatal(err)
	}
}
