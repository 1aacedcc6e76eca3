package off2fcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/internal/cli"
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
	os.WriteFile(manifest, []byte("# nothing needed\n"), 0o644)
	if out, _, err = runCmd(t, "store", "gc", "-manifest", manifest, store); err != nil || !strings.Contains(out, "1 text files removed") {
		t.Fatalf("store gc: %v %s", err, out)
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
