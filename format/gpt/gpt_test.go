package gpt

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteCheckedBySgdisk(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root.img")
	os.WriteFile(root, bytes.Repeat([]byte("R"), 3<<20), 0o644)
	parts := []Partition{
		{Name: "ESP", Type: TypeESP, Size: 8 << 20},
		{Name: "root", Type: TypeRootX8664, Src: root},
	}
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	lay, err := Write(a, "seed", parts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(b, "seed", parts); err != nil {
		t.Fatal(err)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Error("the same inputs gave different images")
	}
	if got := ab[lay[1].First*512 : lay[1].First*512+3<<20]; !bytes.Equal(got, bytes.Repeat([]byte("R"), 3<<20)) {
		t.Error("root partition contents not at its first LBA")
	}
	if lay[0].First != 2048 || lay[1].First != 2048+8<<20/512 {
		t.Errorf("layout %+v", lay)
	}
	if _, err := exec.LookPath("sgdisk"); err != nil {
		t.Skip("sgdisk not installed (gdisk)")
	}
	out, err := exec.Command("sgdisk", "-v", a).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "No problems found") {
		t.Fatalf("sgdisk -v: %v\n%s", err, out)
	}
	out, _ = exec.Command("sgdisk", "-p", a).CombinedOutput()
	for _, want := range []string{"EF00", "8304", "ESP", "root"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("sgdisk -p lacks %q:\n%s", want, out)
		}
	}
}

func TestRejects(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, 2<<20), 0o644)
	out := filepath.Join(dir, "out")
	os.MkdirAll(out, 0o755)
	for name, parts := range map[string][]Partition{
		"missing source": {{Name: "root", Type: TypeRootX8664, Src: filepath.Join(dir, "nope")}},
		"source too big": {{Name: "root", Type: TypeRootX8664, Src: big, Size: 1 << 20}},
		"no size":        {{Name: "data", Type: TypeLinuxData}},
	} {
		if _, err := Write(filepath.Join(out, "disk.img"), "s", parts); err == nil || !strings.Contains(err.Error(), "disk.img") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if left, _ := os.ReadDir(out); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestGUIDString(t *testing.T) {
	if s := TypeESP.String(); s != "C12A7328-F81F-11D2-BA4B-00A0C93EC93B" {
		t.Errorf("ESP type formats as %s", s)
	}
}

// Read gives back what Write laid out; a damaged table is an error.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root.img")
	os.WriteFile(root, bytes.Repeat([]byte("R"), 3<<20), 0o644)
	img := filepath.Join(dir, "disk.img")
	lay, err := Write(img, "seed", []Partition{{Name: "ESP", Type: TypeESP, Size: 8 << 20}, {Name: "root", Type: TypeRootX8664, Src: root}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if tab.Bytes() != st.Size() || len(tab.Partitions) != 2 || tab.Partitions[0] != lay[0] || tab.Partitions[1] != lay[1] {
		t.Errorf("read %+v (%d bytes), wrote %+v (%d bytes)", tab, tab.Bytes(), lay, st.Size())
	}
	for _, c := range []struct {
		off  int64
		want string
	}{{512 + 40, "header checksum"}, {1024 + 10, "entry array checksum"}, {512, "no header"}, {510, "no protective MBR"}} {
		b := []byte{0}
		f.ReadAt(b, c.off)
		f.WriteAt([]byte{b[0] ^ 0xff}, c.off)
		if _, err := Read(f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("byte %d changed: %v, want %q", c.off, err, c.want)
		}
		f.WriteAt(b, c.off)
	}
	if _, err := Read(bytes.NewReader(nil)); err == nil || !strings.Contains(err.Error(), "no GPT") {
		t.Errorf("empty: %v", err)
	}
}

// mustGUID reads the usual form, upper or lower case, and panics on
// anything else.
func TestMustGUID(t *testing.T) {
	if g := mustGUID("c12a7328-f81f-11d2-ba4b-00a0c93ec93b"); g != TypeESP {
		t.Errorf("lower case: %v", g)
	}
	for _, bad := range []string{"", "C12A7328F81F11D2BA4B00A0C93EC93B", "C12A7328-F81F-11D2-BA4B-00A0C93EC93", "C12A7328-F81F-11D2-BA4B-00A0C93EC93BB",
		"G12A7328-F81F-11D2-BA4B-00A0C93EC93B", "C12A7328-F81F-11D2-BA4B0-0A0C93EC93B", "C12A7328--81F-11D2-BA4B-00A0C93EC93B"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("mustGUID(%q) did not panic", bad)
				}
			}()
			mustGUID(bad)
		}()
	}
}

// TestWriteFrozen: the bytes of an image Write makes (a source not a whole
// number of sectors, an empty partition between two filled ones) are the
// ones pinned here, so a change to how the image is written cannot change
// a disk unseen.
func TestWriteFrozen(t *testing.T) {
	dir := t.TempDir()
	src := make([]byte, 3<<20+1234)
	for i := range src {
		src[i] = byte(i*131 + i>>9)
	}
	root := filepath.Join(dir, "root.img")
	if err := os.WriteFile(root, src, 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "d.img")
	if _, err := Write(img, "seed", []Partition{
		{Name: "ESP", Type: TypeESP, Size: 8 << 20, Src: root},
		{Name: "root", Type: TypeRootX8664, Src: root},
		{Name: "data", Type: TypeLinuxData, Size: 2 << 20},
		{Name: "last", Type: TypeLinuxData, Src: root},
	}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	const want = "9bf4f611951e482fbc84af07c57a7c88c9d1797d5260b41407bdbedfbe54c7a3"
	if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != want {
		t.Errorf("image sha256 %s (%d bytes), pinned %s", got, len(b), want)
	}
}
