package flash

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/format/gpt"
)

// flashed writes img onto target with an earlier flash's table: a file
// that holds a disk image.
func flashed(t *testing.T, img, target string) {
	t.Helper()
	if _, err := Write(context.Background(), Options{Image: img, Target: target}); err != nil {
		t.Fatal(err)
	}
}

// noLeftovers fails if a flash left a temporary file in dir.
func noLeftovers(t *testing.T, dir string) {
	t.Helper()
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.Contains(de.Name(), ".flash-") {
			t.Errorf("a flash left %s behind", de.Name())
		}
	}
}

// mbrDisk is a disk with a DOS partition table (one Linux partition) and no GPT.
func mbrDisk() []byte {
	b := make([]byte, 1<<20)
	e := b[446:]
	e[4] = 0x83
	binary.LittleEndian.PutUint32(e[8:], 2048)
	binary.LittleEndian.PutUint32(e[12:], 4096)
	b[510], b[511] = 0x55, 0xAA
	return b
}

// TestFlashCreatesFile: the -h example 'nvboot flash out/demo card.img'
// works without card.img existing; the new file has a new file's mode.
func TestFlashCreatesFile(t *testing.T) {
	needTool(t, "sgdisk")
	dir := t.TempDir()
	img, data, lay := diskImage(t, dir)
	target := filepath.Join(dir, "card.img")
	tgt, err := Describe(target)
	if err != nil || !tgt.New || tgt.String() != target+": new regular file" {
		t.Fatalf("Describe(%s) = %v, %v", target, tgt, err)
	}
	res, err := Write(context.Background(), Options{Image: img, Target: target})
	if err != nil {
		t.Fatal(err)
	}
	ist, _ := os.Stat(img)
	st, err := os.Stat(target)
	if err != nil || !res.Verified || st.Size() != ist.Size() {
		t.Fatalf("result %+v, target %v %v", res, st, err)
	}
	umask := 0o022 // what the test's process most likely has; checked below
	if f, err := os.Create(filepath.Join(dir, "probe")); err == nil {
		fi, _ := f.Stat()
		umask = 0o666 &^ int(fi.Mode().Perm())
		f.Close()
	}
	if got, want := st.Mode().Perm(), os.FileMode(0o666&^umask); got != want {
		t.Errorf("new target has mode %v, want %v", got, want)
	}
	checkFlashed(t, target, data, lay)
	noLeftovers(t, dir)
}

// TestFlashFileTargets: a regular file is overwritten without -yes only
// when nothing is lost: it is empty, all zeros, or a disk image already.
// Anything else is refused, with what it holds and how to proceed, and
// left as it was; with -yes it is replaced.
func TestFlashFileTargets(t *testing.T) {
	defer func(n int64) { zeroCheckMax = n }(zeroCheckMax)
	zeroCheckMax = 2 << 20
	dir := t.TempDir()
	img, _, _ := diskImage(t, dir)
	earlier := filepath.Join(dir, "earlier.img")
	flashed(t, img, earlier)
	prior, _ := os.ReadFile(earlier)
	var bootSector [512]byte // 0x55AA, but no partition in the table
	copy(bootSector[:], "\xeb\x3c\x90mkfs.fat")
	bootSector[510], bootSector[511] = 0x55, 0xAA

	for _, c := range []struct {
		name     string
		content  []byte
		sparse   int64 // truncate to this size after writing content (0: don't)
		ok       bool
		describe string
	}{
		{"empty", nil, 0, true, "regular file, 0 bytes, empty"},
		{"zeros", make([]byte, 1<<20), 0, true, "1.0 MiB, all zeros"},
		{"sparse", nil, 64 << 20, true, "64.0 MiB, all zeros"},
		{"earlier flash", prior, 0, true, "a disk image"},
		{"DOS partition table", mbrDisk(), 0, true, "a disk image"},
		{"text", []byte("notes: buy milk\n"), 0, false, "16 bytes, not a disk image"},
		{"boot sector without partitions", bootSector[:], 0, false, "512 bytes, not a disk image"},
		{"zeros then data", append(make([]byte, 1<<20), 'x'), 0, false, "not a disk image"},
		{"zeros past the check", make([]byte, 3<<20), 0, false, "3.0 MiB, not a disk image"},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.WriteFile(target, c.content, 0o600); err != nil {
				t.Fatal(err)
			}
			if c.sparse > 0 {
				os.Truncate(target, c.sparse)
			}
			before, _ := os.ReadFile(target)
			tgt, err := Describe(target)
			if err != nil || !strings.Contains(tgt.String(), c.describe) {
				t.Errorf("Describe: %v %v, want it to say %q", tgt, err, c.describe)
			}
			_, err = Write(context.Background(), Options{Image: img, Target: target})
			if c.ok {
				if err != nil {
					t.Fatalf("flash onto a file that is %s: %v", c.name, err)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), "not a disk image") ||
					!strings.Contains(err.Error(), "-yes") || !strings.Contains(err.Error(), "name a new file") {
					t.Fatalf("flash onto a file that is %s: err %v, want a refusal naming it, what it holds, and -yes", c.name, err)
				}
				if after, _ := os.ReadFile(target); !bytes.Equal(after, before) {
					t.Fatal("the refused flash changed the file")
				}
				if _, err := Write(context.Background(), Options{Image: img, Target: target, Confirmed: true}); err != nil {
					t.Fatalf("confirmed flash: %v", err)
				}
			}
			head := make([]byte, 520)
			f, _ := os.Open(target)
			f.ReadAt(head, 0)
			f.Close()
			if string(head[512:]) != "EFI PART" {
				t.Error("no GPT on the target after the flash")
			}
			if st, _ := os.Stat(target); st.Mode().Perm() != 0o600 {
				t.Errorf("the flash changed the file's mode to %v", st.Mode().Perm())
			}
		})
	}
	noLeftovers(t, dir)
}

// TestFlashRefusesImageDirectory: the files of an image directory (the pmem
// images next to disk.img) are never a flash target, not even with -yes.
func TestFlashRefusesImageDirectory(t *testing.T) {
	dir := t.TempDir()
	img, _, _ := diskImage(t, dir)
	imgDir := filepath.Dir(img)
	state := filepath.Join(imgDir, "pmem-state.img")
	precious := bytes.Repeat([]byte("state "), 100000)
	os.WriteFile(state, precious, 0o644)
	link := filepath.Join(dir, "state-link.img")
	os.Symlink(state, link)
	other := filepath.Join(dir, "other")
	os.Mkdir(other, 0o755)
	os.WriteFile(filepath.Join(other, "image.json"), []byte(`{}`), 0o644)
	outside := filepath.Join(dir, "outside.img") // linked to from the image directory
	os.WriteFile(outside, nil, 0o644)
	linkIn := filepath.Join(imgDir, "pmem-text.img")
	os.Symlink(outside, linkIn)
	for _, target := range []string{state, filepath.Join(imgDir, "card.img"), link, filepath.Join(other, "card.img"), linkIn} {
		for _, yes := range []bool{false, true} {
			_, err := Write(context.Background(), Options{Image: img, Target: target, Confirmed: yes})
			if err == nil || !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), "image directory") {
				t.Errorf("flash onto %s (-yes %v): err %v, want a refusal naming the image directory", target, yes, err)
			}
		}
	}
	if got, _ := os.ReadFile(state); !bytes.Equal(got, precious) {
		t.Error("the image's pmem-state.img changed")
	}
	if st, _ := os.Stat(outside); st.Size() != 0 {
		t.Error("the file an image directory links to changed")
	}
	for _, p := range []string{filepath.Join(imgDir, "card.img"), filepath.Join(other, "card.img")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a refused flash created %s", p)
		}
	}
	noLeftovers(t, imgDir)
}

// TestFlashInterruptedKeepsFile: a flash onto a file that stops half-way
// (or fails its checks) leaves the file as it was, and nothing beside it.
func TestFlashInterruptedKeepsFile(t *testing.T) {
	dir := t.TempDir()
	img, _, _ := diskImage(t, dir)
	target := filepath.Join(dir, "card.img")
	// An earlier good flash, that must survive.
	flashed(t, img, target)
	before, _ := os.ReadFile(target)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Write(ctx, Options{Image: img, Target: target, Progress: func(string, int64, int64) { cancel() }})
	if err == nil || !strings.Contains(err.Error(), target+" left as it was") {
		t.Fatalf("err %v, want the stop reported with the target left as it was", err)
	}
	if after, _ := os.ReadFile(target); !bytes.Equal(after, before) {
		t.Error("an interrupted flash changed the target")
	}
	// Stopped while verifying.
	ctx, cancel = context.WithCancel(context.Background())
	_, err = Write(ctx, Options{Image: img, Target: target, Progress: func(stage string, _, _ int64) {
		if stage == "verify" {
			cancel()
		}
	}})
	if err == nil || !strings.Contains(err.Error(), "left as it was") {
		t.Fatalf("stopped while verifying: err %v", err)
	}
	if after, _ := os.ReadFile(target); !bytes.Equal(after, before) {
		t.Error("a flash stopped while verifying changed the target")
	}
	// A new file is not created.
	fresh := filepath.Join(dir, "fresh.img")
	ctx, cancel = context.WithCancel(context.Background())
	if _, err := Write(ctx, Options{Image: img, Target: fresh, Progress: func(string, int64, int64) { cancel() }}); err == nil {
		t.Fatal("interrupted flash onto a new file: no error")
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Error("an interrupted flash created its target")
	}
	noLeftovers(t, dir)
}

// TestFlashTargetChangedMeanwhile: a file written to while it is being
// flashed is not replaced: what was written to it stays.
func TestFlashTargetChangedMeanwhile(t *testing.T) {
	dir := t.TempDir()
	img, _, _ := diskImage(t, dir)
	target := filepath.Join(dir, "card.img")
	os.WriteFile(target, nil, 0o644)
	once := false
	_, err := Write(context.Background(), Options{Image: img, Target: target, Progress: func(string, int64, int64) {
		if !once {
			once = true
			os.WriteFile(target, []byte("written meanwhile"), 0o644)
		}
	}})
	if err == nil || !strings.Contains(err.Error(), "changed while it was being flashed") {
		t.Fatalf("err %v, want the change reported", err)
	}
	if got, _ := os.ReadFile(target); string(got) != "written meanwhile" {
		t.Errorf("target holds %d bytes, want what was written meanwhile", len(got))
	}
	noLeftovers(t, dir)
}

// TestFlashThroughSymlink: a symbolic link to a file stays a link; the
// file it points to is flashed.
func TestFlashThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	img, _, _ := diskImage(t, dir)
	real := filepath.Join(dir, "cards", "card.img")
	os.Mkdir(filepath.Dir(real), 0o755)
	os.WriteFile(real, nil, 0o644)
	link := filepath.Join(dir, "card-link.img")
	os.Symlink(real, link)
	if _, err := Write(context.Background(), Options{Image: img, Target: link}); err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(link); err != nil || l != real {
		t.Errorf("link is now %q %v", l, err)
	}
	head := make([]byte, gpt.HeadBytes)
	f, _ := os.Open(real)
	f.ReadAt(head, 0)
	f.Close()
	if string(head[512:520]) != "EFI PART" {
		t.Error("the linked file was not flashed")
	}
	noLeftovers(t, dir)
	noLeftovers(t, filepath.Dir(real))
	dangling := filepath.Join(dir, "dangling.img")
	os.Symlink(filepath.Join(dir, "nowhere", "x.img"), dangling)
	if _, err := Write(context.Background(), Options{Image: img, Target: dangling}); err == nil || !strings.Contains(err.Error(), dangling) {
		t.Errorf("flash onto a dangling link: %v", err)
	}
}

// TestFlashInterruptedDeviceHasNoTable: a block device is written in place,
// its old table wiped first and the new one written last, so a flash that
// stops half-way leaves no table pointing at half-written partitions.
func TestFlashInterruptedDeviceHasNoTable(t *testing.T) {
	dir := t.TempDir()
	img, _, _ := diskImage(t, dir)
	dev := loopDevice(t, 16<<20)
	if _, err := Write(context.Background(), Options{Image: img, Target: dev, Confirmed: true}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Write(ctx, Options{Image: img, Target: dev, Confirmed: true, Progress: func(string, int64, int64) { cancel() }})
	if err == nil || !strings.Contains(err.Error(), "no partition table written") {
		t.Fatalf("err %v, want the stop reported with no table written", err)
	}
	head := make([]byte, gpt.HeadBytes)
	f, _ := os.Open(dev)
	f.ReadAt(head, 0)
	f.Close()
	if !bytes.Equal(head, make([]byte, gpt.HeadBytes)) {
		t.Errorf("an interrupted flash left a partition table at the start of the device")
	}
}
