package nvbootcmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/format/gpt"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/outdir"
)

// nvboot run of an image whose disk.img was cut short refuses before QEMU
// starts, naming disk.img and saying it is truncated (it would boot into a
// kernel panic); the image is left as it is.
func TestRunTruncatedDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "img")
	os.Mkdir(dir, 0o755)
	part := filepath.Join(t.TempDir(), "root")
	os.WriteFile(part, bytes.Repeat([]byte("r"), 4<<20), 0o644)
	disk := filepath.Join(dir, outdir.DiskFile)
	lay, err := gpt.Write(disk, "t", []gpt.Partition{{Name: "root", Type: gpt.TypeRootX8664, Src: part}})
	if err != nil {
		t.Fatal(err)
	}
	im := appliance.Image{Layout: appliance.ELF, Kernel: outdir.KernelFile, Disk: outdir.DiskFile,
		Pmem:       []string{outdir.TextPmemFile, outdir.StatePmemFile},
		Partitions: []appliance.Partition{{Name: "root", Offset: lay[0].First * 512, Bytes: (lay[0].Last - lay[0].First + 1) * 512}}}
	b, _ := json.Marshal(im)
	os.WriteFile(filepath.Join(dir, outdir.ManifestFile), b, 0o644)
	for _, f := range im.Pmem {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	os.Truncate(disk, 3<<20)
	_, stderr, err := execute("run", "-accel", "tcg", dir)
	if err == nil || !strings.Contains(err.Error(), disk) || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("err %v, want %s named as truncated", err, disk)
	}
	if strings.Contains(stderr, "poweroff") {
		t.Errorf("QEMU started:\n%s", stderr)
	}
	if st, _ := os.Stat(disk); st.Size() != 3<<20 {
		t.Errorf("disk.img changed")
	}
}
