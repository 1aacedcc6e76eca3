package flash

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/format/gpt"
	"github.com/nvboot/nvboot/format/mbr"
)

// diskImage makes a GPT image with two partitions of random bytes, as
// nvboot build does, in an image directory under dir, and returns it with
// the partitions' contents.
func diskImage(t *testing.T, dir string) (string, [][]byte, []gpt.Layout) {
	t.Helper()
	dir = filepath.Join(dir, "image")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var parts []gpt.Partition
	var data [][]byte
	for i, n := range []int{3 << 20, 5<<20 + 4096} {
		b := make([]byte, n)
		rand.Read(b)
		p := filepath.Join(dir, "part"+string(rune('a'+i)))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, gpt.Partition{Name: "p" + string(rune('a'+i)), Type: gpt.TypeLinuxData, Src: p})
		data = append(data, b)
	}
	img := filepath.Join(dir, "disk.img")
	lay, err := gpt.Write(img, "flash-test", parts)
	if err != nil {
		t.Fatal(err)
	}
	return img, data, lay
}

func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed (make deps)", name)
	}
}

// checkFlashed checks the target with sgdisk (an independent GPT reader)
// and compares each partition's bytes with the source.
func checkFlashed(t *testing.T, target string, data [][]byte, lay []gpt.Layout) {
	t.Helper()
	out, err := exec.Command("sgdisk", "-v", target).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "No problems found") {
		t.Fatalf("sgdisk -v %s: %v\n%s", target, err, out)
	}
	f, err := os.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, l := range lay {
		got := make([]byte, len(data[i]))
		if _, err := f.ReadAt(got, l.First*512); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data[i]) {
			t.Errorf("partition %s differs from its source after flashing", l.Name)
		}
	}
}

func TestFlashOntoBiggerFile(t *testing.T) {
	needTool(t, "sgdisk")
	dir := t.TempDir()
	img, data, lay := diskImage(t, dir)
	ist, _ := os.Stat(img)
	target := filepath.Join(dir, "card.img")
	garbage := bytes.Repeat([]byte{0xA5}, int(3*ist.Size()))
	if err := os.WriteFile(target, garbage, 0o644); err != nil {
		t.Fatal(err)
	}
	var stages []string
	res, err := Write(context.Background(), Options{Image: img, Target: target, Confirmed: true, Progress: func(s string, done, total int64) {
		if len(stages) == 0 || stages[len(stages)-1] != s {
			stages = append(stages, s)
		}
		if done > total {
			t.Errorf("progress %d of %d", done, total)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified || res.TargetBytes != int64(len(garbage)) || res.ImageBytes != ist.Size() || len(res.SHA256) != 64 {
		t.Errorf("result %+v", res)
	}
	if strings.Join(stages, ",") != "write,verify" {
		t.Errorf("progress stages %v, want write then verify", stages)
	}
	st, _ := os.Stat(target)
	if st.Size() != int64(len(garbage)) {
		t.Errorf("target is %d bytes after flashing, was %d", st.Size(), len(garbage))
	}
	checkFlashed(t, target, data, lay)
	// The backup table sits at the end of the bigger target, as sgdisk reads it.
	out, _ := exec.Command("sgdisk", "-p", target).CombinedOutput()
	if want := "last usable sector is " + strconv.FormatInt(int64(len(garbage))/512-34, 10); !strings.Contains(string(out), want) {
		t.Errorf("sgdisk -p: want %q in\n%s", want, out)
	}
}

func TestFlashRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	img, _, _ := diskImage(t, dir)
	notGPT := filepath.Join(dir, "notgpt.img")
	if err := os.WriteFile(notGPT, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "card.img")
	before := bytes.Repeat([]byte("old contents "), 100000)
	if err := os.WriteFile(target, before, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, image, target, want string
	}{
		{"missing image", filepath.Join(dir, "nope.img"), target, "nope.img"},
		{"image without a GPT", notGPT, target, "no protective MBR"},
		{"image onto itself", img, img, "is the image itself"},
		{"directory", img, dir, "not a block device or a regular file"},
		{"character device", img, "/dev/null", "not a block device or a regular file"},
		{"missing target", img, filepath.Join(dir, "nope", "card.img"), "nope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Write(context.Background(), Options{Image: c.image, Target: c.target, Confirmed: true})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one naming %q", err, c.want)
			}
			got, _ := os.ReadFile(target)
			if !bytes.Equal(got, before) {
				t.Errorf("the target changed although the flash was refused")
			}
		})
	}
}

// loopDevice attaches a file of n bytes as a real block device, or skips.
func loopDevice(t *testing.T, n int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a loop device")
	}
	needTool(t, "losetup")
	f := filepath.Join(t.TempDir(), "loop.img")
	if err := os.WriteFile(f, bytes.Repeat([]byte{0x5A}, int(n)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", f).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device here: losetup: %v %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}

func TestFlashBlockDevice(t *testing.T) {
	needTool(t, "sgdisk")
	dir := t.TempDir()
	img, data, lay := diskImage(t, dir)
	dev := loopDevice(t, 16<<20)
	tgt, err := Describe(dev)
	if err != nil || !tgt.BlockDevice || tgt.Bytes != 16<<20 {
		t.Fatalf("Describe(%s) = %+v, %v", dev, tgt, err)
	}
	if _, err := Write(context.Background(), Options{Image: img, Target: dev}); err == nil || !strings.Contains(err.Error(), "-yes") {
		t.Fatalf("unconfirmed flash of a block device: err %v, want a refusal naming -yes", err)
	}
	b := make([]byte, 4096)
	f, _ := os.Open(dev)
	f.ReadAt(b, 0)
	f.Close()
	if !bytes.Equal(b, bytes.Repeat([]byte{0x5A}, 4096)) {
		t.Fatal("the refused flash wrote to the device")
	}
	res, err := Write(context.Background(), Options{Image: img, Target: dev, Confirmed: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified || !res.BlockDevice {
		t.Errorf("result %+v", res)
	}
	checkFlashed(t, dev, data, lay)
}

func TestFlashRefusesSmallOrMountedDevice(t *testing.T) {
	dir := t.TempDir()
	img, _, _ := diskImage(t, dir)
	small := loopDevice(t, 4<<20)
	if _, err := Write(context.Background(), Options{Image: img, Target: small, Confirmed: true}); err == nil || !strings.Contains(err.Error(), "smaller than the image") {
		t.Fatalf("flash onto a 4 MiB device: err %v, want 'smaller than the image'", err)
	}

	needTool(t, "mkfs.ext4")
	dev := loopDevice(t, 32<<20)
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", dev).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", dev, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount here: %v %s", err, out)
	}
	defer exec.Command("umount", mnt).Run()
	if err := os.WriteFile(filepath.Join(mnt, "keep"), []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Write(context.Background(), Options{Image: img, Target: dev, Confirmed: true})
	if err == nil || !strings.Contains(err.Error(), "mounted on "+mnt) {
		t.Fatalf("flash onto a mounted device: err %v, want one naming the mount point %s", err, mnt)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "keep")); err != nil || string(b) != "precious" {
		t.Errorf("the mounted filesystem lost a file: %q %v", b, err)
	}
}

// TestFlashMBRCard flashes a Raspberry Pi card (an MBR disk with logical
// partitions, format/mbr) onto a bigger file: nothing to move, the table
// written last, every byte read back; a card cut short is refused.
func TestFlashMBRCard(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "root.img")
	os.WriteFile(data, bytes.Repeat([]byte("R"), 1<<20), 0o644)
	img := filepath.Join(dir, "disk.img")
	if _, err := mbr.Write(img, 0x6e76626f, []mbr.Partition{{Name: "boot", Type: mbr.TypeFAT32LBA, Size: 1 << 20},
		{Name: "root", Type: mbr.TypeLinux, Src: data, Logical: true}}); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(img)
	target := filepath.Join(t.TempDir(), "card.img")
	os.WriteFile(target, bytes.Repeat([]byte{0xA5}, 3*len(want)), 0o644)
	if res, err := Write(context.Background(), Options{Image: img, Target: target, Confirmed: true}); err != nil || !res.Verified {
		t.Fatalf("%+v, %v", res, err)
	}
	got, _ := os.ReadFile(target)
	if !bytes.Equal(got[:len(want)], want) || len(got) != 3*len(want) {
		t.Error("the card does not hold the image")
	}
	f, _ := os.Open(target)
	defer f.Close()
	if tab, err := mbr.Read(f); err != nil || len(tab.Partitions) != 2 {
		t.Errorf("the flashed card's table: %+v, %v", tab, err)
	}
	short := filepath.Join(dir, "short.img")
	os.WriteFile(short, want[:len(want)-512], 0o644)
	if _, err := Write(context.Background(), Options{Image: short, Target: filepath.Join(t.TempDir(), "new.img")}); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("a card cut short: %v", err)
	}
}
