package tryboot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestMarshalParse(t *testing.T) {
	a := Autoboot{Boot: 2, TryBoot: 3, AB: true}
	b := a.Marshal()
	want := "[all]\ntryboot_a_b=1\nboot_partition=2\n[tryboot]\nboot_partition=3\n"
	if string(b) != want {
		t.Fatalf("Marshal:\n%s\nwant\n%s", b, want)
	}
	if got, err := Parse(b); err != nil || got != a {
		t.Fatalf("Parse(Marshal) = %+v, %v", got, err)
	}
	// A commit swaps the digits: the file keeps its length.
	if c := (Autoboot{Boot: 3, TryBoot: 2, AB: true}).Marshal(); len(c) != len(b) {
		t.Errorf("committed slot B's file is %d bytes, slot A's %d", len(c), len(b))
	}
}

// TestParse holds the firmware's reading: sections filter, a later value
// wins, [all] applies to a tryboot too, [none] to nothing.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Autoboot
	}{
		{"", Autoboot{}},
		{"boot_partition=2\n", Autoboot{Boot: 2, TryBoot: 2}},
		{"# nvboot\n\n[all]\r\ntryboot_a_b=1\r\nboot_partition=2\r\n[tryboot]\r\nboot_partition=3\r\n", Autoboot{Boot: 2, TryBoot: 3, AB: true}},
		{"[tryboot]\nboot_partition=3\n[all]\nboot_partition=2\n", Autoboot{Boot: 2, TryBoot: 2}},
		{"[all]\nboot_partition=2\n[none]\nboot_partition=5\n", Autoboot{Boot: 2, TryBoot: 2}},
		{"[tryboot]\ntryboot_a_b=1\n", Autoboot{AB: true}},
		{" boot_partition = 7 \n[tryboot]\n boot_partition=0", Autoboot{Boot: 7, TryBoot: 0}},
	} {
		got, err := Parse([]byte(c.in))
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for in, want := range map[string]string{
		strings.Repeat("#", 513):            "513 bytes",
		"[pi4]\nboot_partition=2\n":         `line 1: section "[pi4]"`,
		"[all]\nkernel=x\n":                 `line 2: key "kernel"`,
		"boot_partition\n":                  "not key=value",
		"boot_partition=two\n":              `boot_partition="two"`,
		"boot_partition=64\n":               "0 to 63",
		"boot_partition=-1\n":               "0 to 63",
		"[all]\n[tryboot]\ntryboot_a_b=2\n": `line 3: tryboot_a_b="2"`,
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), Name) {
			t.Errorf("Parse(%q): %v, want an error naming %s and %q", in, err, Name, want)
		}
	}
}

// fatImage makes a FAT filesystem of kib KiB with mkfs.vfat (-F bits)
// holding files, by mcopy: the field's own tools.
func fatImage(t testing.TB, bits string, kib int, files map[string]string) string {
	t.Helper()
	for _, tool := range []string{"mkfs.vfat", "mcopy"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (dosfstools, mtools)", tool)
		}
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "fat.img")
	args := []string{"-C", "--invariant", "-i", "6e76626f"}
	if bits != "" {
		args = append(args, "-F", bits)
	}
	if out, err := exec.Command("mkfs.vfat", append(args, img, strconv.Itoa(kib))...).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.vfat: %v\n%s", err, out)
	}
	for name, text := range files {
		src := filepath.Join(dir, name)
		os.WriteFile(src, []byte(text), 0o644)
		cmd := exec.Command("mcopy", "-i", img, src, "::/")
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mcopy %s: %v\n%s", name, err, out)
		}
	}
	return img
}

// mtype reads a file of the image back with mtools.
func mtype(t *testing.T, img, name string) string {
	t.Helper()
	cmd := exec.Command("mtype", "-i", img, "::/"+name)
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mtype %s: %v", name, err)
	}
	return string(out)
}

// TestLocateOnRealFAT finds a file where mkfs.vfat and mcopy put it, on
// each FAT type, beside long names and a deleted file.
func TestLocateOnRealFAT(t *testing.T) {
	committedA := string(Autoboot{Boot: 2, TryBoot: 3, AB: true}.Marshal())
	for _, c := range []struct {
		bits string
		kib  int
	}{{"12", 1024}, {"16", 16 << 10}, {"32", 40 << 10}} {
		files := map[string]string{"bootcode.bin": "boot code", "a-long-file-name.txt": "x", "config.txt": "# empty\n", "autoboot.txt": committedA}
		img := fatImage(t, c.bits, c.kib, files)
		cmd := exec.Command("mdel", "-i", img, "::/config.txt") // a deleted entry before it
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mdel: %v\n%s", err, out)
		}
		f, err := os.Open(img)
		if err != nil {
			t.Fatal(err)
		}
		a, at, err := Read(f)
		f.Close()
		if err != nil {
			t.Fatalf("FAT%s: %v", c.bits, err)
		}
		if a != (Autoboot{Boot: 2, TryBoot: 3, AB: true}) || at.Size != int64(len(committedA)) || at.Offset%512 != 0 {
			t.Errorf("FAT%s: %+v at %+v", c.bits, a, at)
		}
		b, _ := os.ReadFile(img)
		if string(b[at.Offset:at.Offset+at.Size]) != committedA {
			t.Errorf("FAT%s: the bytes at %d are not the file", c.bits, at.Offset)
		}
		if _, err := Locate(bytes.NewReader(b), "config.txt"); err == nil {
			t.Errorf("FAT%s: the deleted config.txt was located", c.bits)
		}
	}
}

// TestWriteInPlace commits slot B on a real FAT32 filesystem: mtools reads
// the new file back, fsck.vfat finds nothing wrong, and nothing else in
// the image changed.
func TestWriteInPlace(t *testing.T) {
	a := Autoboot{Boot: 2, TryBoot: 3, AB: true}
	img := fatImage(t, "32", 40<<10, map[string]string{"autoboot.txt": string(a.Marshal()), "bootcode.bin": "boot code"})
	before, _ := os.ReadFile(img)
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := Autoboot{Boot: 3, TryBoot: 2, AB: true}
	old, err := Write(f, b)
	if err != nil || old != a {
		t.Fatalf("Write: old %+v, %v", old, err)
	}
	if got := mtype(t, img, Name); got != string(b.Marshal()) {
		t.Errorf("mtype reads back %q", got)
	}
	after, _ := os.ReadFile(img)
	diff := 0
	for i := range after {
		if after[i] != before[i] {
			diff++
			if i/512 != int(bytes.Index(before, a.Marshal())/512) {
				t.Errorf("byte %d changed, outside the file's sector", i)
			}
		}
	}
	if diff != 2 {
		t.Errorf("%d bytes changed, want the two digits", diff)
	}
	if _, err := exec.LookPath("fsck.vfat"); err == nil {
		if out, err := exec.Command("fsck.vfat", "-n", img).CombinedOutput(); err != nil {
			t.Errorf("fsck.vfat -n: %v\n%s", err, out)
		}
	}
	// Unchanged: no write at all.
	if _, err := Write(f, b); err != nil {
		t.Fatal(err)
	}
	// A file of another length is refused, and nothing is written.
	if _, err := Write(f, Autoboot{Boot: 12, TryBoot: 2, AB: true}); !errors.Is(err, ErrLength) {
		t.Errorf("a longer file: %v, want ErrLength", err)
	}
	if got := mtype(t, img, Name); got != string(b.Marshal()) {
		t.Errorf("after a refused write mtype reads %q", got)
	}
}

// TestLocateRefuses: damage to what places the file is named, never
// followed outside the filesystem.
func TestLocateRefuses(t *testing.T) {
	a := string(Autoboot{Boot: 2, TryBoot: 3, AB: true}.Marshal())
	img := fatImage(t, "32", 40<<10, map[string]string{"autoboot.txt": a, "big.bin": strings.Repeat("b", 1024)})
	good, _ := os.ReadFile(img)
	at, err := Locate(bytes.NewReader(good), Name)
	if err != nil {
		t.Fatal(err)
	}
	dirEnt := bytes.Index(good, []byte("AUTOBOOTTXT"))
	for name, c := range map[string]struct {
		damage func(b []byte)
		file   string
		want   string
	}{
		"signature":           {func(b []byte) { b[510] = 0 }, Name, "no boot sector signature"},
		"sector size":         {func(b []byte) { binary.LittleEndian.PutUint16(b[11:], 500) }, Name, "500 bytes a sector"},
		"cluster size":        {func(b []byte) { b[13] = 3 }, Name, "3 sectors a cluster"},
		"no FATs":             {func(b []byte) { b[16] = 0 }, Name, "0 FATs"},
		"data past the end":   {func(b []byte) { binary.LittleEndian.PutUint32(b[32:], 10) }, Name, "data would start"},
		"root cluster":        {func(b []byte) { binary.LittleEndian.PutUint32(b[44:], 1<<27) }, Name, "root directory at cluster"},
		"missing":             {func(b []byte) {}, "kernel.img", "no kernel.img"},
		"no 8.3 name":         {func(b []byte) {}, "autoboot.text", "no 8.3 name"},
		"more than a cluster": {func(b []byte) {}, "big.bin", "more than a cluster"},
		"cluster outside": {func(b []byte) {
			binary.LittleEndian.PutUint16(b[dirEnt+26:], 0xFFFF)
			binary.LittleEndian.PutUint16(b[dirEnt+20:], 0x0FFF)
		}, Name, "outside clusters"},
		"empty": {func(b []byte) { binary.LittleEndian.PutUint32(b[dirEnt+28:], 0) }, Name, "is empty"},
	} {
		b := bytes.Clone(good)
		c.damage(b)
		if _, err := Locate(bytes.NewReader(b), c.file); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
	// A root directory whose chain loops back on itself ends.
	b := bytes.Clone(good)
	p, _ := parseBPB(b)
	binary.LittleEndian.PutUint32(b[p.fatStart+p.rootCluster*4:], uint32(p.rootCluster))
	if _, err := Locate(bytes.NewReader(b), "nothing.txt"); err == nil || !strings.Contains(err.Error(), "does not end") {
		t.Errorf("a looping root directory: %v", err)
	}
	_ = at
}

func FuzzParse(f *testing.F) {
	f.Add(Autoboot{Boot: 2, TryBoot: 3, AB: true}.Marshal())
	f.Add([]byte("[tryboot]\nboot_partition=3\n[none]\n# x\nboot_partition=1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Parse(b)
		if err != nil {
			return
		}
		// What parses is within the firmware's range, and nvboot's own
		// form of it parses back the same.
		if a.Boot < 0 || a.Boot > 63 || a.TryBoot < 0 || a.TryBoot > 63 {
			t.Fatalf("%+v", a)
		}
		if again, err := Parse(a.Marshal()); err != nil || again != a {
			t.Fatalf("%+v re-parsed as %+v, %v", a, again, err)
		}
	})
}

func FuzzLocate(f *testing.F) {
	img := fatImage(f, "12", 64, map[string]string{"autoboot.txt": string(Autoboot{Boot: 2, TryBoot: 3, AB: true}.Marshal())})
	b, _ := os.ReadFile(img)
	f.Add(b[:20<<10]) // the boot sector, FATs, root directory and the file
	f.Fuzz(func(t *testing.T, fs []byte) {
		at, err := Locate(bytes.NewReader(fs), Name)
		if err != nil {
			return
		}
		// Whatever is located lies inside the filesystem and a cluster.
		if at.Offset < 512 || at.Size <= 0 || at.Size > 128*4096 {
			t.Fatalf("%+v", at)
		}
	})
}
