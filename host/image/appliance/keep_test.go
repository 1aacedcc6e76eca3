package appliance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/format/fsdax"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// useDevice writes a file into the filesystem of a pmem image, as the
// device does when it runs (kv's heap on the state, nvinit mounting the
// store): the image is no longer the one the build wrote.
func useDevice(t *testing.T, img, name, body string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(src, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := fmt.Sprintf("%s?offset=%d", img, fsdax.Align)
	if out, err := exec.Command("debugfs", "-w", "-R", "write "+src+" "+name, fs).CombinedOutput(); err != nil {
		t.Fatalf("debugfs write into %s: %v\n%s", fs, err, out)
	}
}

// A rebuild over an image the device has used keeps the device's state
// (pmem-state.img) when the new build's state has the same size and format,
// and an unchanged text store as the device left it; it says so. When the
// state cannot be kept, the rebuild refuses, naming pmem-state.img and
// -discard-state, and changes nothing; with DiscardState it starts from a
// blank state and says that it discarded one. A state the device never used
// is replaced without a word.
func TestRebuildKeepsState(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs and filesystems")
	}
	buildtest.NeedTools(t)
	k := buildtest.FakeKernel(t)
	out := filepath.Join(t.TempDir(), "out")
	state, text := filepath.Join(out, outdir.StatePmemFile), filepath.Join(out, outdir.TextPmemFile)
	var log strings.Builder
	build := func(cfg *config.Config, l Layout, discard bool) (*Result, error) {
		log.Reset()
		return BuildImage(context.Background(), Options{Config: cfg, Layout: l, Out: out, Kernel: k, ModuleRoot: moduleRoot(t),
			DiscardState: discard, Logf: func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) }})
	}
	first, err := build(config.Demo(), ELF, false)
	if err != nil {
		t.Fatal(err)
	}
	if first.StateSHA256 == "" || first.TextSHA256 == "" || len(first.Kept)+len(first.Discarded) != 0 {
		t.Fatalf("first build: state %q text %q kept %v discarded %v", first.StateSHA256, first.TextSHA256, first.Kept, first.Discarded)
	}

	// The device ran: 224 kv keys in its state, the store mounted.
	useDevice(t, state, "kv.heap", strings.Repeat("key=value\n", 224))
	useDevice(t, text, "mounted", "by nvinit")
	usedState, usedText := fileHash(t, state), fileHash(t, text)

	t.Log("rebuild, same config: state and text store kept")
	res, err := build(config.Demo(), ELF, false)
	if err != nil {
		t.Fatal(err)
	}
	if fileHash(t, state) != usedState {
		t.Errorf("the rebuild replaced the device's %s", outdir.StatePmemFile)
	}
	if fileHash(t, text) != usedText {
		t.Errorf("the rebuild replaced the unchanged text store %s", outdir.TextPmemFile)
	}
	if !slices.Equal(res.Kept, []string{outdir.TextPmemFile, outdir.StatePmemFile}) {
		t.Errorf("Kept %v, want both pmem images", res.Kept)
	}
	if !strings.Contains(log.String(), "kept "+outdir.StatePmemFile) || !strings.Contains(log.String(), "kept "+outdir.TextPmemFile) {
		t.Errorf("the build did not say what it kept:\n%s", log.String())
	}
	if res.StateSHA256 != first.StateSHA256 {
		t.Errorf("image.json's StateSHA256 is %s, want the blank state's %s (the kept one is not what the build wrote)", res.StateSHA256, first.StateSHA256)
	}

	t.Log("rebuild with a bigger state: refused, nothing changed")
	bigger := config.Demo()
	bigger.StateMiB = 256
	before := snapshotHashes(t, filepath.Dir(out))
	_, err = build(bigger, ELF, false)
	if !errors.Is(err, ErrStateNotKept) {
		t.Fatalf("err %v, want ErrStateNotKept", err)
	}
	t.Logf("refused: %v", err)
	for _, w := range []string{out, outdir.StatePmemFile, "-discard-state", "128 MiB", "256 MiB"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
	if after := snapshotHashes(t, filepath.Dir(out)); !maps.Equal(before, after) {
		t.Errorf("a refused rebuild changed things: before %v, after %v", before, after)
	}

	t.Log("rebuild with a bigger state and -discard-state: a blank state")
	res, err = build(bigger, ELF, true)
	if err != nil {
		t.Fatal(err)
	}
	if h := fileHash(t, state); fmt.Sprintf("%x", h) != res.StateSHA256 {
		t.Errorf("state %x after -discard-state, want the blank %s", h, res.StateSHA256)
	}
	if !slices.Equal(res.Discarded, []string{outdir.StatePmemFile}) || slices.Contains(res.Kept, outdir.StatePmemFile) {
		t.Errorf("Kept %v Discarded %v", res.Kept, res.Discarded)
	}
	if !strings.Contains(log.String(), "discarded") {
		t.Errorf("the build did not say it discarded the state:\n%s", log.String())
	}

	t.Log("rebuild over a blank state with another size, and another layout: replaced, nothing said")
	res, err = build(config.Demo(), OFF2F, false)
	if err != nil {
		t.Fatal(err)
	}
	if h := fileHash(t, state); fmt.Sprintf("%x", h) != res.StateSHA256 {
		t.Errorf("state %x, want the blank %s", h, res.StateSHA256)
	}
	if h := fileHash(t, text); fmt.Sprintf("%x", h) != res.TextSHA256 || h == usedText {
		t.Errorf("the changed text store was kept")
	}
	if len(res.Kept)+len(res.Discarded) != 0 || strings.Contains(log.String(), "kept") {
		t.Errorf("Kept %v Discarded %v\n%s", res.Kept, res.Discarded, log.String())
	}
}

// snapshotHashes is the sha256 of every regular file under dir, by path.
func snapshotHashes(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	m := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		m[p] = fileHash(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// stateCompatible takes over a state of the same size and format only; the
// reason names what differs.
func TestStateCompatible(t *testing.T) {
	buildtest.NeedTools(t)
	dir := t.TempDir()
	mk := func(name string, fsMiB int, fileMiB int64) string {
		t.Helper()
		fs := filepath.Join(dir, name+".ext4")
		if out, err := exec.Command("mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", fs, fmt.Sprintf("%dM", fsMiB)).CombinedOutput(); err != nil {
			t.Fatalf("mke2fs: %v\n%s", err, out)
		}
		p := filepath.Join(dir, name+".img")
		if err := fsdax.WriteImage(p, fileMiB<<20, fs); err != nil {
			t.Fatal(err)
		}
		return p
	}
	built := mk("built", 100, 128)
	same := mk("same", 100, 128)
	smallerFS := mk("smallerfs", 64, 128)
	bigger := mk("bigger", 100, 256)
	noInfo := mk("noinfo", 100, 128)
	notExt4 := mk("notext4", 100, 128)
	zero := func(p string, off int64, n int) {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(make([]byte, n), off); err != nil {
			t.Fatal(err)
		}
	}
	zero(noInfo, fsdax.InfoOffset, fsdax.InfoSize)
	zero(notExt4, fsdax.Align+1024, 1024)
	for _, tt := range []struct {
		name, old, want string
	}{
		{"same geometry", same, ""},
		{"bigger file", bigger, "it is 256 MiB, this build's is 128 MiB"},
		{"smaller filesystem", smallerFS, "blocks of 4096 bytes"},
		{"no info block", noInfo, "no valid fsdax info block"},
		{"no ext4", notExt4, "no ext4 superblock"},
	} {
		got := stateCompatible(tt.old, built)
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
