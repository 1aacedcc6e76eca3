package off2fcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/off2f"
)

func runCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := Execute(context.Background(), &cli.Context{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Args: args})
	return stdout.String(), stderr.String(), err
}

func buildC(t *testing.T, dir, name string, flags ...string) string {
	t.Helper()
	src := filepath.Join(dir, name+".c")
	os.WriteFile(src, []byte("#include <stdio.h>\nint main(){puts(\"hello off2f\");return 0;}\n"), 0o644)
	out := filepath.Join(dir, name)
	if b, err := exec.Command("gcc", append(flags, "-o", out, src)...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	return out
}

func TestConvertInspectVerifyUnpackStore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gcc")
	}
	dir := t.TempDir()
	in := buildC(t, dir, "hello", "-static")
	store, fb := filepath.Join(dir, "store"), filepath.Join(dir, "fb")
	hdr := filepath.Join(dir, "hello.off2f")

	out, _, err := runCmd(t, "convert", "-json", "-store", store, "-fallback", fb, "-prefault", "-mount", "/dev/pmem0:ext4:dax=always", "-o", hdr, in)
	if err != nil {
		t.Fatal(err)
	}
	var conv convertResult
	if err := json.Unmarshal([]byte(out), &conv); err != nil || len(conv.Stored) != 2 || !conv.Stored[0].New {
		t.Fatalf("convert -json: %v %q", err, out)
	}

	out, _, err = runCmd(t, "inspect", "-json", hdr)
	if err != nil {
		t.Fatal(err)
	}
	var ins struct {
		Kind string
		Note struct {
			Hash        string
			StoreDir    string `json:"store_dir"`
			FallbackDir string `json:"fallback_dir"`
			Device      string
			Flags       []string
			Segments    []struct{ Prot string }
		}
	}
	json.Unmarshal([]byte(out), &ins)
	if ins.Kind != "header" || ins.Note.Hash != conv.Text || ins.Note.StoreDir != store || ins.Note.FallbackDir != fb ||
		ins.Note.Device != "/dev/pmem0" || len(ins.Note.Segments) < 2 || !contains(ins.Note.Flags, "prefault") {
		t.Fatalf("inspect -json header: %s", out)
	}
	text := filepath.Join(store, conv.Text)
	out, _, err = runCmd(t, "inspect", text)
	if err != nil || !strings.Contains(out, "OFF2F text file") || !strings.Contains(out, conv.Text) {
		t.Fatalf("inspect text: %v %s", err, out)
	}
	if out, _, err = runCmd(t, "verify", hdr); err != nil || strings.Count(out, ": ok") != 2 {
		t.Fatalf("verify: %v %s", err, out)
	}

	unpacked := filepath.Join(dir, "hello.unpacked")
	if _, _, err := runCmd(t, "unpack", "-o", unpacked, hdr); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(unpacked).Output(); err != nil || string(b) != "hello off2f\n" {
		t.Fatalf("unpacked program: %v %q", err, b)
	}

	// Damage one byte of the text body: only verify's full hash notices.
	f, _ := os.OpenFile(text, os.O_WRONLY, 0)
	f.WriteAt([]byte{0xcc}, 5000)
	f.Close()
	out, _, err = runCmd(t, "verify", "-json", hdr)
	var vr verifyResult
	json.Unmarshal([]byte(out), &vr)
	if err == nil || vr.OK || !strings.Contains(vr.Error, "does not match") || vr.FallbackError != "" {
		t.Fatalf("verify of damaged text: %v %s", err, out)
	}

	out, _, err = runCmd(t, "store", "ls", "-json", store)
	if err != nil || !strings.Contains(out, conv.Text) {
		t.Fatalf("store ls: %v %s", err, out)
	}
	manifest := filepath.Join(dir, "MANIFEST")
	os.WriteFile(manifest, []byte("# keep hello's text only\n"+conv.Text+"\n"), 0o644)
	old := strings.Repeat("0", 64)
	os.WriteFile(filepath.Join(store, old), append(off2f.TextMagic[:], "old text"...), 0o444)
	if out, _, err = runCmd(t, "store", "gc", "-manifest", manifest, store); err != nil ||
		!strings.Contains(out, "removed "+old) || !strings.Contains(out, "1 text files removed") {
		t.Fatalf("store gc: %v %s", err, out)
	}
	if _, err := os.Stat(text); err != nil {
		t.Errorf("gc removed the text the manifest lists: %v", err)
	}
}

// gc in a directory that is not a text store removes nothing, and says why;
// it names every file it removes, leftovers of interrupted writes too.
func TestStoreGCCommand(t *testing.T) {
	dir := t.TempDir()
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, n := range []string{a, b} {
		os.WriteFile(filepath.Join(dir, n), append(off2f.TextMagic[:], n...), 0o444)
	}
	os.WriteFile(filepath.Join(dir, ".env.tmpl"), []byte("SECRET=1\n"), 0o600)
	manifest := filepath.Join(t.TempDir(), "MANIFEST")
	os.WriteFile(manifest, []byte(a+"\n"), 0o644)
	out, _, err := runCmd(t, "store", "gc", "-manifest", manifest, dir)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, ".env.tmpl")) || !strings.Contains(err.Error(), "does not look like a text store") {
		t.Fatalf("gc of a directory that is not a store: %v\n%s", err, out)
	}
	if des, _ := os.ReadDir(dir); len(des) != 3 {
		t.Fatalf("gc removed files although it refused: %d left", len(des))
	}

	os.Remove(filepath.Join(dir, ".env.tmpl"))
	empty := filepath.Join(t.TempDir(), "MANIFEST")
	os.WriteFile(empty, nil, 0o644)
	if _, _, err := runCmd(t, "store", "gc", "-manifest", empty, dir); err == nil || !strings.Contains(err.Error(), empty+" lists no text hash") {
		t.Fatalf("gc with an empty manifest: %v", err)
	}

	tmp := "." + b + ".off2f-tmp-0123456789abcdef"
	os.WriteFile(filepath.Join(dir, tmp), []byte("partial"), 0o600)
	out, _, err = runCmd(t, "store", "gc", "-manifest", manifest, dir)
	if err != nil || !strings.Contains(out, "removed "+b+" (") || !strings.Contains(out, "removed "+tmp+" (7 bytes, leftover of an interrupted write)") ||
		!strings.Contains(out, "1 text files removed, 1 leftovers of interrupted writes removed") {
		t.Fatalf("gc: %v\n%s", err, out)
	}
}

// ls refuses a directory that is not a text store, as gc does (it said
// "0 text files" with exit 0); a store with MANIFEST, leftovers and
// directories (lost+found) is listed, an empty one too.
func TestStoreLsCommand(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "readme.txt"), []byte("not a store\n"), 0o644)
	for _, args := range [][]string{{"store", "ls", dir}, {"store", "ls", "-json", dir}} {
		out, _, err := runCmd(t, args...)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "readme.txt")) || !strings.Contains(err.Error(), "does not look like a text store") || out != "" {
			t.Errorf("%q of a directory that is not a store: %v, output %q", args, err, out)
		}
	}
	store := t.TempDir()
	if out, _, err := runCmd(t, "store", "ls", store); err != nil || out != "0 text files, 0 bytes\n" {
		t.Errorf("ls of an empty store: %v %q", err, out)
	}
	a := strings.Repeat("a", 64)
	os.WriteFile(filepath.Join(store, a), append(off2f.TextMagic[:], a...), 0o444)
	os.WriteFile(filepath.Join(store, off2f.ManifestName), []byte(a+"\n"), 0o644)
	os.WriteFile(filepath.Join(store, "."+a+".off2f-tmp-0123456789abcdef"), []byte("partial"), 0o600)
	os.Mkdir(filepath.Join(store, "lost+found"), 0o700)
	if out, _, err := runCmd(t, "store", "ls", store); err != nil || !strings.Contains(out, a) || !strings.Contains(out, "1 text files") {
		t.Errorf("ls of a store: %v %q", err, out)
	}
	if _, _, err := runCmd(t, "store", "ls", filepath.Join(dir, "readme.txt")); err == nil || !strings.Contains(err.Error(), "readme.txt") {
		t.Errorf("ls of a file: %v", err)
	}
}

// convertHello converts a static hello into dir: the header file, the store
// and the text's path in it.
func convertHello(t *testing.T, dir string) (hdr, store, text string) {
	t.Helper()
	in := buildC(t, dir, "hello", "-static")
	store, hdr = filepath.Join(dir, "store"), filepath.Join(dir, "hello.off2f")
	out, _, err := runCmd(t, "convert", "-json", "-store", store, "-o", hdr, in)
	var conv convertResult
	if err != nil || json.Unmarshal([]byte(out), &conv) != nil {
		t.Fatalf("convert: %v %s", err, out)
	}
	return hdr, store, filepath.Join(store, conv.Text)
}

// inspect checks a text file's size as the loader does: a truncated one is an
// error saying so, not a list of fields.
func TestInspectTruncatedText(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gcc")
	}
	dir := t.TempDir()
	_, _, text := convertHello(t, dir)
	raw, err := os.ReadFile(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", raw[:100<<10], fmt.Sprintf("text file is %d bytes, its header says %d: truncated (the loader refuses it)", 100<<10, len(raw))},
		{"longer", append(raw[:len(raw):len(raw)], make([]byte, 4096)...), fmt.Sprintf("text file is %d bytes, its header says %d: longer than its header says", len(raw)+4096, len(raw))},
	} {
		p := filepath.Join(dir, tc.name)
		os.WriteFile(p, tc.data, 0o644)
		for _, args := range [][]string{{"inspect", p}, {"inspect", "-json", p}} {
			out, _, err := runCmd(t, args...)
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) || out != "" {
				t.Errorf("%q: %v, want an error naming it and %q; output:\n%s", args, err, tc.want, out)
			}
		}
	}
}

// verify says a missing text is missing, and names where it looked, once:
// the output has the checks that passed, the error the ones that failed
// (it printed "missing (no such file)" and then "text file ... is missing").
func TestVerifyMissingText(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gcc")
	}
	dir := t.TempDir()
	hdr, _, text := convertHello(t, dir)
	if err := os.Remove(text); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCmd(t, "verify", hdr)
	if err == nil || err.Error() != "verify "+hdr+": text file "+text+" is missing" || strings.Contains(out, text) {
		t.Errorf("verify with the text gone: %v, output %q: want the error once, in the error", err, out)
	}
	// A fallback copy that matches is reported as such; the missing text
	// still only in the error.
	fb := filepath.Join(dir, "fallback")
	hdr2 := filepath.Join(dir, "hello2.off2f")
	if _, _, err := runCmd(t, "convert", "-store", filepath.Join(dir, "store2"), "-fallback", fb, "-o", hdr2, filepath.Join(dir, "hello")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "store2"))
	out, _, err = runCmd(t, "verify", hdr2)
	if err == nil || !strings.Contains(err.Error(), "is missing") || strings.Contains(out, "missing") || !strings.Contains(out, "fallback") || !strings.Contains(out, ": ok") {
		t.Errorf("verify with the text gone, the fallback there: %v, output %q", err, out)
	}
	out, _, err = runCmd(t, "verify", "-json", hdr)
	var vr verifyResult
	if err == nil || json.Unmarshal([]byte(out), &vr) != nil || !vr.Missing || vr.OK || vr.Text != text {
		t.Errorf("verify -json with the text gone: %v\n%s", err, out)
	}
}

// Bad input: a clear error naming the input and the reason, and nothing written.
func TestConvertBadInputWritesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gcc")
	}
	dir := t.TempDir()
	dyn := buildC(t, dir, "dyn")
	store, out := filepath.Join(dir, "store"), filepath.Join(dir, "out")
	for _, tc := range []struct{ in, want string }{
		{dyn, "dynamically linked"},
		{filepath.Join(dir, "missing"), "no such file"},
		{"/etc/hostname", "not an ELF file"},
	} {
		_, _, err := runCmd(t, "convert", "-store", store, "-o", out, tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.in) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("convert %s: got %v, want an error naming it and %q", tc.in, err, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("convert %s left %s behind", tc.in, out)
		}
		if des, _ := os.ReadDir(store); len(des) != 0 {
			t.Errorf("convert %s left %d files in the store", tc.in, len(des))
		}
	}
}

// An input that is not an executable (a script, an empty file, a Go
// package that is not main) is refused with the file named, what it is and
// what convert wants, nothing written; not the ELF reader's "bad magic
// number '[35 33 47 98]'" or a bare "EOF".
func TestConvertNotELF(t *testing.T) {
	dir := t.TempDir()
	store, out := filepath.Join(dir, "store"), filepath.Join(dir, "out")
	for _, tc := range []struct{ name, content, want string }{
		{"script.sh", "#!/bin/sh\necho hi\n", "a script (#!/bin/sh)"},
		{"empty", "", "an empty file"},
		{"lib.a", "!<arch>\n__.PKGDEF       0           0     0     644     10        `\n", "a package that is not main"},
	} {
		in := filepath.Join(dir, tc.name)
		os.WriteFile(in, []byte(tc.content), 0o755)
		_, _, err := runCmd(t, "convert", "-store", store, "-o", out, in)
		if err == nil || !strings.Contains(err.Error(), in) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "static x86-64 and aarch64 ELF executables") {
			t.Errorf("convert %s: %v, want an error naming it, %q and what convert wants", tc.name, err, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("convert %s left %s behind", tc.name, out)
		}
		if _, err := os.Stat(store); err == nil {
			t.Errorf("convert %s created the store", tc.name)
		}
	}
}

// A header file whose loader (PT_INTERP) does not exist on this host fails
// to exec here with a bare "no such file or directory" from the kernel:
// convert and verify say so, naming the loader, and how to convert for
// this host. A loader that exists gets no such note.
func TestLoaderMissingOnHost(t *testing.T) {
	if _, err := os.Stat(off2f.DefaultLoader); err == nil {
		t.Skipf("%s exists on this host", off2f.DefaultLoader)
	}
	exe, err := os.Executable() // this test: a static Go program unless cgo linked it
	if err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(exe); err != nil {
		t.Fatal(err)
	} else if _, err := off2f.Convert(raw, off2f.Options{}); err != nil {
		t.Skipf("the test binary does not convert: %v", err)
	}
	dir := t.TempDir()
	store, hdr := filepath.Join(dir, "store"), filepath.Join(dir, "prog.off2f")
	_, stderr, err := runCmd(t, "convert", "-store", store, "-o", hdr, exe)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{off2f.DefaultLoader + " does not exist on this host", hdr, "no such file or directory", "-loader"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("convert with the default loader: stderr %q, want %q", stderr, want)
		}
	}
	out, stderr, err := runCmd(t, "verify", "-store", store, hdr)
	if err != nil || !strings.Contains(out, ": ok") || !strings.Contains(stderr, off2f.DefaultLoader+" does not exist on this host") {
		t.Errorf("verify: %v, stdout %q, stderr %q: want ok, and the loader named missing", err, out, stderr)
	}
	out, _, err = runCmd(t, "verify", "-json", "-store", store, hdr)
	var vr struct {
		OK            bool `json:"ok"`
		LoaderMissing bool `json:"loader_missing"`
	}
	if err != nil || json.Unmarshal([]byte(out), &vr) != nil || !vr.OK || !vr.LoaderMissing {
		t.Errorf("verify -json: %v %s", err, out)
	}

	loader := filepath.Join(dir, "ld-off2f") // exists: no note
	os.WriteFile(loader, []byte("stand-in"), 0o755)
	if _, stderr, err := runCmd(t, "convert", "-loader", loader, "-store", store, "-o", hdr, exe); err != nil || stderr != "" {
		t.Errorf("convert with a loader that exists: %v, stderr %q", err, stderr)
	}
	if _, stderr, err := runCmd(t, "verify", "-store", store, hdr); err != nil || stderr != "" {
		t.Errorf("verify with a loader that exists: %v, stderr %q", err, stderr)
	}
}

// A header file whose loader on this host is built for another machine
// fails to exec here with "exec format error": convert and verify say so,
// naming both machines and how to build the other machine's loader, and
// inspect names the program's machine. Both ways: an aarch64 program with
// an x86-64 loader, an x86-64 program with an aarch64 "loader" (any ELF
// file of that machine will do for the check).
func TestLoaderOfOtherMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-builds a Go program")
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "probe-arm64"), "../../off2f/testdata/progs/probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH=arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build GOARCH=arm64: %v\n%s", err, out)
	}
	arm64Prog := filepath.Join(dir, "probe-arm64")
	amd64Prog := buildC(t, dir, "hello", "-static")
	for _, c := range []struct {
		name, in, loader, prog, loaderMachine, goarch string
	}{
		{"arm64 program", arm64Prog, amd64Prog, "aarch64", "x86-64", "arm64"},
		{"amd64 program", amd64Prog, arm64Prog, "x86-64", "aarch64", "amd64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, hdr := filepath.Join(dir, c.goarch, "store"), filepath.Join(dir, c.goarch+".off2f")
			_, stderr, err := runCmd(t, "convert", "-loader", c.loader, "-store", store, "-o", hdr, c.in)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("the loader %s on this host is built for %s and %s for %s", c.loader, c.loaderMachine, hdr, c.prog)
			build := "make -C loader ARCH=" + c.goarch
			if c.goarch == runtime.GOARCH {
				build = "make build"
			}
			for _, w := range []string{want, "exec format error", build} {
				if !strings.Contains(stderr, w) {
					t.Errorf("convert: stderr %q, want %q", stderr, w)
				}
			}
			out, stderr, err := runCmd(t, "verify", "-json", "-store", store, hdr)
			var vr verifyResult
			if err != nil || json.Unmarshal([]byte(out), &vr) != nil || !vr.OK || !vr.LoaderOtherMachine || vr.LoaderMissing || !strings.Contains(stderr, want) {
				t.Errorf("verify: %v, stdout %s, stderr %q", err, out, stderr)
			}
			out, _, err = runCmd(t, "inspect", hdr)
			if err != nil || !strings.Contains(out, "machine:       "+c.prog+"\n") {
				t.Errorf("inspect: %v\n%s", err, out)
			}
			// The program's own machine's loader: no note.
			if _, stderr, err := runCmd(t, "convert", "-loader", c.in, "-store", store, "-o", hdr, c.in); err != nil || stderr != "" {
				t.Errorf("convert with a loader of its machine: %v, stderr %q", err, stderr)
			}
		})
	}
}

// A bad -o is found before anything is written: no text in the store, no
// store directory created, and the error names -o and the path, not a
// temporary file. A failure while writing the header file takes back the
// text (and the directories) this run created.
func TestConvertBadOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gcc")
	}
	dir := t.TempDir()
	in := buildC(t, dir, "hello", "-static")
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	existing, created := filepath.Join(dir, "store"), filepath.Join(dir, "new", "store")
	os.Mkdir(existing, 0o755)
	for _, tc := range []struct{ out, want string }{
		{filepath.Join(dir, "missing", "hello.off2f"), "-o " + dir + "/missing/hello.off2f: directory " + dir + "/missing does not exist"},
		{filepath.Join(dir, "d"), "-o " + dir + "/d is a directory"},
		{filepath.Join(in, "x"), "-o " + in + "/x: " + in + " is not a directory"},
		{"/sys/hello.off2f", "-o: writing /sys/hello.off2f: permission denied"}, // fails only when written
	} {
		for _, store := range []string{existing, created} {
			_, _, err := runCmd(t, "convert", "-store", store, "-o", tc.out, in)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), ".tmp") || strings.Contains(err.Error(), "off2f-tmp") {
				t.Errorf("convert -o %s: %v, want an error with %q", tc.out, err, tc.want)
			}
			if des, _ := os.ReadDir(existing); len(des) != 0 {
				t.Errorf("convert -o %s left %d files in the store", tc.out, len(des))
			}
			if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
				t.Errorf("convert -o %s left the store directory it created", tc.out)
			}
		}
	}
	if des, _ := os.ReadDir(filepath.Join(dir, "d")); len(des) != 0 {
		t.Errorf("-o DIR: %d files written into it", len(des))
	}
	if _, _, err := runCmd(t, "unpack", "-o", filepath.Join(dir, "missing", "x"), in); err == nil || !strings.Contains(err.Error(), "-o "+dir+"/missing/x: directory "+dir+"/missing does not exist") {
		t.Errorf("unpack -o into a missing directory: %v", err)
	}
}

// A -store that does not exist is created and the output says so; the
// default one (the appliance's /nv/text) is not created on a host.
func TestConvertStoreDir(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gcc")
	}
	dir := t.TempDir()
	in := buildC(t, dir, "hello", "-static")
	store := filepath.Join(dir, "a", "store")
	out, _, err := runCmd(t, "convert", "-store", store, "-o", filepath.Join(dir, "h1"), in)
	if err != nil || !strings.Contains(out, "written (directory "+store+" created)") {
		t.Errorf("convert into a new -store: %v\n%s", err, out)
	}
	out, _, err = runCmd(t, "convert", "-json", "-store", filepath.Join(dir, "b"), "-o", filepath.Join(dir, "h2"), in)
	if err != nil || !strings.Contains(out, `"created_dir": true`) {
		t.Errorf("convert -json into a new -store: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	if _, _, err := runCmd(t, "convert", "-store", filepath.Join(dir, "file"), "-o", filepath.Join(dir, "h3"), in); err == nil || !strings.Contains(err.Error(), "-store "+dir+"/file is not a directory") {
		t.Errorf("-store FILE: %v", err)
	}
	if _, err := os.Stat(off2f.DefaultStoreDir); err == nil {
		t.Skipf("%s exists here", off2f.DefaultStoreDir)
	}
	_, _, err = runCmd(t, "convert", "-o", filepath.Join(dir, "h4"), in)
	if err == nil || !strings.Contains(err.Error(), "text store "+off2f.DefaultStoreDir+" does not exist (the default -store") {
		t.Errorf("convert with the default -store missing: %v", err)
	}
	if _, err := os.Stat(off2f.DefaultStoreDir); err == nil {
		t.Errorf("convert created %s", off2f.DefaultStoreDir)
	}
}

func TestHelpAndUsage(t *testing.T) {
	for _, verb := range []string{"convert", "inspect", "verify", "unpack", "store"} {
		args := []string{verb, "-h"}
		if verb == "store" {
			args = []string{"store", "ls", "-h"}
		}
		stdout, _, err := runCmd(t, args...)
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(stdout, "Examples:") || !strings.Contains(stdout, "Usage: off2f "+verb) {
			t.Errorf("%s -h: %v\n%s", verb, err, stdout)
		}
		if stdout, _, err := runCmd(t, "help", verb); err != nil || !strings.Contains(stdout, "Usage: off2f "+verb) {
			t.Errorf("help %s: %v\n%s", verb, err, stdout)
		}
	}
	if _, _, err := runCmd(t, "frobnicate"); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("unknown command: %v", err)
	}
	if _, _, err := runCmd(t, "convert"); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("convert without input: %v", err)
	}
	if _, _, err := runCmd(t, "convert", "-mount", "bad", "x"); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("bad -mount: %v", err)
	}
}

// Flags work before the store verb, between it and DIR, and after DIR; -h
// before the verb is help.
func TestStoreArgs(t *testing.T) {
	for _, args := range [][]string{{"store", "-h"}, {"store", "ls", "-h"}, {"store", "-h", "gc"}} {
		stdout, _, err := runCmd(t, args...)
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(stdout, "Usage: off2f store") || !strings.Contains(stdout, "Examples:") {
			t.Errorf("%q: %v\n%s", args, err, stdout)
		}
	}
	dir := t.TempDir()
	name := strings.Repeat("a", 64)
	os.WriteFile(filepath.Join(dir, name), append(off2f.TextMagic[:], name...), 0o444)
	for _, args := range [][]string{
		{"store", "-json", "ls", dir},
		{"store", "ls", "-json", dir},
		{"store", "ls", dir, "-json"},
	} {
		out, _, err := runCmd(t, args...)
		var ls struct {
			Store string
			Texts []off2f.Entry
		}
		if err != nil || json.Unmarshal([]byte(out), &ls) != nil || ls.Store != dir || len(ls.Texts) != 1 || ls.Texts[0].Name != name {
			t.Errorf("%q: %v\n%s", args, err, out)
		}
	}
	manifest := filepath.Join(t.TempDir(), "MANIFEST")
	os.WriteFile(manifest, []byte(name+"\n"), 0o644)
	if out, _, err := runCmd(t, "store", "-manifest", manifest, "gc", dir, "-json"); err != nil || !strings.Contains(out, `"removed": []`) {
		t.Errorf("store -manifest M gc DIR -json: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"store"}, "store needs ls or gc"},
		{[]string{"store", "-json"}, "store needs ls or gc"},
		{[]string{"store", "rm", dir}, `unknown store command "rm"`},
		{[]string{"store", "ls"}, "store ls takes one store directory, got 0"},
		{[]string{"store", "ls", dir, "extra"}, `store ls takes one store directory, got 2: ["` + dir + `" "extra"]`},
		{[]string{"store", "-manifest", manifest, "ls", dir}, "-manifest is for gc"},
		{[]string{"store", "-bogus", "ls", dir}, "-bogus"},
	} {
		if _, _, err := runCmd(t, tc.args...); !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// convert -crc records the text's CRC-32C in the note: inspect shows it
// (the crc flag, the value); verify checks the text against it too, so a
// note whose CRC disagrees with a text whose hash is right (the loader
// would refuse it) fails verify, naming both values.
func TestConvertCRC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gcc")
	}
	dir := t.TempDir()
	in := buildC(t, dir, "hello", "-static")
	store, hdr := filepath.Join(dir, "store"), filepath.Join(dir, "hello.off2f")
	if _, _, err := runCmd(t, "convert", "-store", store, "-crc", "-o", hdr, in); err != nil {
		t.Fatal(err)
	}
	h, err := off2f.ParseHeader(mustReadFile(t, hdr))
	if err != nil || h.Note.Flags&off2f.FlagCRC == 0 {
		t.Fatalf("header: %v, flags %#x: want FlagCRC", err, h.Note.Flags)
	}
	want := fmt.Sprintf("0x%08x", h.Note.CRC)
	out, _, err := runCmd(t, "inspect", "-json", hdr)
	var ins struct {
		Note struct {
			Flags []string
			CRC   string `json:"crc32c"`
		}
	}
	if err != nil || json.Unmarshal([]byte(out), &ins) != nil || !contains(ins.Note.Flags, "crc") || ins.Note.CRC != want {
		t.Fatalf("inspect -json: %v %s; want the crc flag and crc32c %s", err, out, want)
	}
	if out, _, err := runCmd(t, "inspect", hdr); err != nil || !strings.Contains(out, "text CRC-32C:  "+want) {
		t.Fatalf("inspect: %v %s", err, out)
	}
	if out, _, err := runCmd(t, "verify", hdr); err != nil || !strings.Contains(out, ": ok") {
		t.Fatalf("verify: %v %s", err, out)
	}
	// The note's CRC off by one bit: the text's hash still matches.
	n := h.Note
	n.CRC ^= 1
	desc, err := n.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	raw := mustReadFile(t, hdr)
	i := bytes.Index(raw, desc[:off2f.NoteFixedSize])
	if i < 0 {
		t.Fatal("the note is not in the header file")
	}
	copy(raw[i:], desc)
	if err := os.WriteFile(hdr, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCmd(t, "verify", hdr)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("CRC-32C of the text's segments is %s, the note's 0x%08x", want, n.CRC)) {
		t.Fatalf("verify with a wrong CRC in the note: %v", err)
	}
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A Go program linked -R 0x200000 converts with 2 MiB spans: inspect names
// the flag (huge-span) and shows every read-only segment 2 MiB-mapped, the
// data's image not; verify passes.
func TestInspectHugeSpans(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hi\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "hi")
	cmd := exec.Command("go", "build", "-ldflags=-R=0x200000", "-o", in, src)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	store, hdr := filepath.Join(dir, "store"), filepath.Join(dir, "hi.off2f")
	if _, _, err := runCmd(t, "convert", "-store", store, "-o", hdr, in); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCmd(t, "inspect", "-json", hdr)
	var ins struct {
		Note struct {
			Flags    []string
			Segments []struct {
				Prot string `json:"prot"`
				Huge bool   `json:"huge_aligned"`
			}
		}
	}
	if err != nil || json.Unmarshal([]byte(out), &ins) != nil || !contains(ins.Note.Flags, "huge-span") || len(ins.Note.Segments) < 2 {
		t.Fatalf("inspect -json: %v %s; want the huge-span flag", err, out)
	}
	for i, s := range ins.Note.Segments {
		if s.Huge != (s.Prot != "rw-") {
			t.Errorf("segment %d (%s): huge_aligned %v", i, s.Prot, s.Huge)
		}
	}
	if out, _, err := runCmd(t, "verify", hdr); err != nil || !strings.Contains(out, ": ok") {
		t.Fatalf("verify: %v %s", err, out)
	}
}
