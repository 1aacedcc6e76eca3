package appliance

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/image/gpt"
)

// diskImage writes an image directory whose disk.img has an esp, a root and
// a data partition, as a build lays them out, and returns its image.json.
func diskImage(t *testing.T, dir string) *Image {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	var parts []gpt.Partition
	for _, p := range []struct {
		name string
		typ  gpt.GUID
		size int
	}{{"esp", gpt.TypeESP, 3 << 20}, {"root", gpt.TypeRootX8664, 5 << 20}, {"data", gpt.TypeLinuxData, 2 << 20}} {
		src := filepath.Join(t.TempDir(), p.name)
		os.WriteFile(src, bytes.Repeat([]byte(p.name[:1]), p.size), 0o644)
		parts = append(parts, gpt.Partition{Name: p.name, Type: p.typ, Src: src})
	}
	lay, err := gpt.Write(filepath.Join(dir, DiskFile), "t", parts)
	if err != nil {
		t.Fatal(err)
	}
	im := &Image{Layout: ELF, Kernel: KernelFile, Disk: DiskFile, Pmem: []string{TextPmemFile, StatePmemFile}}
	for _, l := range lay {
		im.Partitions = append(im.Partitions, Partition{Name: l.Name, Offset: l.First * 512, Bytes: (l.Last - l.First + 1) * 512})
	}
	return im
}

// A disk.img that is shorter than its partition table says (a copy cut
// short, a full disk), has no table, or is not the disk image.json
// describes is refused before a boot, naming disk.img and why; the file is
// not changed.
func TestCheckDisk(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, disk string, im *Image)
		want   []string
	}{
		{"as built", func(*testing.T, string, *Image) {}, nil},
		{"cut in the root partition", func(t *testing.T, disk string, im *Image) {
			os.Truncate(disk, im.Partitions[1].Offset+1<<20)
		}, []string{"truncated", "partition root ends at byte"}},
		{"backup table cut off", func(t *testing.T, disk string, im *Image) {
			st, _ := os.Stat(disk)
			os.Truncate(disk, st.Size()-512)
		}, []string{"truncated", "backup"}},
		{"empty", func(t *testing.T, disk string, im *Image) { os.Truncate(disk, 0) }, []string{"no GPT", "empty"}},
		{"no table", func(t *testing.T, disk string, im *Image) {
			f, _ := os.OpenFile(disk, os.O_WRONLY, 0)
			f.WriteAt(make([]byte, 1024), 0)
			f.Close()
		}, []string{"no GPT"}},
		{"image.json from another build", func(t *testing.T, disk string, im *Image) {
			im.Partitions[1].Bytes += 1 << 20
		}, []string{"image.json", "root"}},
		{"image.json with a partition the table lacks", func(t *testing.T, disk string, im *Image) {
			im.Partitions = append(im.Partitions, Partition{Name: "extra", Offset: 1 << 30, Bytes: 1 << 20})
		}, []string{"image.json", "extra"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "img")
			im := diskImage(t, dir)
			disk := filepath.Join(dir, DiskFile)
			tt.change(t, disk, im)
			before := fileHash(t, disk)
			err := CheckDisk(dir, im)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range append([]string{disk}, tt.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			// VMConfig, which every boot goes through, checks it too.
			os.WriteFile(filepath.Join(dir, TextPmemFile), nil, 0o644)
			os.WriteFile(filepath.Join(dir, StatePmemFile), nil, 0o644)
			if _, err := VMConfig(dir, im, BootOptions{}); err == nil || !strings.Contains(err.Error(), disk) {
				t.Errorf("VMConfig: %v", err)
			}
			if fileHash(t, disk) != before {
				t.Error("the check changed disk.img")
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "img")
		im := diskImage(t, dir)
		os.Remove(filepath.Join(dir, DiskFile))
		if err := CheckDisk(dir, im); err == nil || !strings.Contains(err.Error(), DiskFile) {
			t.Errorf("err %v", err)
		}
	})
}
