package diskimage

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLBAs(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, make([]byte, 1<<20+1), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "disk.img")
	for _, c := range []struct {
		name string
		src  string
		size int64
		want int64
		err  string
	}{
		{"one byte", "", 1, 2048, ""},
		{"one MiB", "", 1 << 20, 2048, ""},
		{"a byte over", "", 1<<20 + 1, 4096, ""},
		{"sized by source", src, 0, 4096, ""},
		{"source padded", src, 3 << 20, 6144, ""},
		{"missing source", filepath.Join(dir, "nope"), 0, 0, "partition missing source: "},
		{"source too big", src, 1 << 20, 0, "larger than the partition"},
		{"no size", "", 0, 0, "partition no size has no size"},
	} {
		got, err := LBAs(img, c.name, c.src, c.size)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %d, %v; want %d", c.name, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), img)):
			t.Errorf("%s: %v, want an error naming %s and saying %q", c.name, err, img, c.err)
		}
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := bytes.Repeat([]byte("abc"), 700000) // over the copy buffer, not a whole sector
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "disk.img")
	if err := Write(img, 8192, []Table{{0, []byte("head")}, {8191, []byte("tail")}},
		[]Source{{Name: "p", Src: src, LBA: 2048}}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 8192*Sector)
	copy(want, "head")
	copy(want[8191*Sector:], "tail")
	copy(want[2048*Sector:], data)
	if !bytes.Equal(got, want) {
		t.Error("the image is not the tables and the source at their sectors, zeros elsewhere")
	}

	// A source that cannot be read: an error naming the image and the
	// partition, and nothing left behind.
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	err = Write(filepath.Join(out, "disk.img"), 4096, nil, []Source{{Name: "root", Src: filepath.Join(dir, "gone"), LBA: 2048}})
	if err == nil || !strings.Contains(err.Error(), "disk.img") || !strings.Contains(err.Error(), "partition root") {
		t.Errorf("missing source: %v, want an error naming the image and the partition", err)
	}
	if left, _ := os.ReadDir(out); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}
