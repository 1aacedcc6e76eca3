package mbr

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// piParts is the Raspberry Pi A/B card's shape: three FAT partitions, then
// the roots and the data in the extended partition.
func piParts(t *testing.T, dir string) []Partition {
	root := filepath.Join(dir, "root.img")
	if err := os.WriteFile(root, bytes.Repeat([]byte("R"), 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	return []Partition{
		{Name: "config", Type: TypeFAT32LBA, Size: 4 << 20},
		{Name: "boot-a", Type: TypeFAT32LBA, Size: 8 << 20},
		{Name: "boot-b", Type: TypeFAT32LBA, Size: 8 << 20},
		{Name: "root-a", Type: TypeLinux, Src: root, Logical: true},
		{Name: "root-b", Type: TypeLinux, Size: 3 << 20, Logical: true},
		{Name: "data", Type: TypeLinux, Size: 2 << 20, Logical: true},
	}
}

func TestWriteCheckedBySfdisk(t *testing.T) {
	dir := t.TempDir()
	parts := piParts(t, dir)
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	lay, err := Write(a, 0x6e76626f, parts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(b, 0x6e76626f, parts); err != nil {
		t.Fatal(err)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Error("the same inputs gave different images")
	}
	wantNum := []int{1, 2, 3, 5, 6, 7}
	for i, l := range lay {
		if l.Number != wantNum[i] || l.Name != parts[i].Name || l.First%2048 != 0 {
			t.Errorf("partition %d: %+v, want number %d on a 1 MiB boundary", i, l, wantNum[i])
		}
	}
	if got := ab[lay[3].First*512 : lay[3].First*512+3<<20]; !bytes.Equal(got, bytes.Repeat([]byte("R"), 3<<20)) {
		t.Error("root-a's contents are not at its first LBA")
	}
	if got := PARTUUID(0x6e76626f, lay[3].Number); got != "6e76626f-05" {
		t.Errorf("PARTUUID %q", got)
	}

	// Read gives back what Write placed.
	f, _ := os.Open(a)
	defer f.Close()
	tab, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if tab.Disk != 0x6e76626f || tab.Extended == nil || tab.Extended.Number != 4 || len(tab.Partitions) != len(lay) {
		t.Fatalf("read back %+v (extended %+v)", tab, tab.Extended)
	}
	for i, l := range tab.Partitions {
		if l.Number != lay[i].Number || l.First != lay[i].First || l.Last != lay[i].Last || l.Type != lay[i].Type {
			t.Errorf("read back %+v, wrote %+v", l, lay[i])
		}
	}
	if tab.Bytes() != int64(len(ab)) || tab.Part(6) == nil || tab.Part(4) != nil {
		t.Errorf("Bytes %d (image %d), Part(6) %v, Part(4) %v", tab.Bytes(), len(ab), tab.Part(6), tab.Part(4))
	}

	// The field's tools agree.
	if _, err := exec.LookPath("sfdisk"); err != nil {
		t.Skip("sfdisk not installed (fdisk)")
	}
	out, err := exec.Command("sfdisk", "--verify", a).CombinedOutput()
	if err != nil || strings.Contains(strings.ToLower(string(out)), "warning") || strings.Contains(string(out), "overlap") {
		t.Fatalf("sfdisk --verify: %v\n%s", err, out)
	}
	out, err = exec.Command("sfdisk", "--json", a).Output()
	if err != nil {
		t.Fatal(err)
	}
	var js struct {
		PartitionTable struct {
			Label, ID  string
			Partitions []struct {
				Node        string
				Start, Size int64
				Type        string
			}
		}
	}
	if err := json.Unmarshal(out, &js); err != nil {
		t.Fatal(err)
	}
	pt := js.PartitionTable
	if pt.Label != "dos" || pt.ID != "0x6e76626f" || len(pt.Partitions) != 7 {
		t.Fatalf("sfdisk --json: %s", out)
	}
	byNode := map[string]int{}
	for i, p := range pt.Partitions {
		byNode[p.Node] = i
	}
	for _, l := range lay {
		p := pt.Partitions[byNode[a+itoa(l.Number)]]
		if p.Start != l.First || p.Size != l.Last-l.First+1 {
			t.Errorf("sfdisk sees partition %d at %d, %d sectors; written at %d, %d", l.Number, p.Start, p.Size, l.First, l.Last-l.First+1)
		}
	}
	if p := pt.Partitions[byNode[a+"4"]]; p.Type != "f" {
		t.Errorf("partition 4 has type %s, want f (extended, LBA)", p.Type)
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

func TestPrimaryOnly(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "d.img")
	lay, err := Write(img, 1, []Partition{{Name: "boot", Type: TypeFAT32LBA, Size: 1}, {Name: "root", Type: TypeLinux, Size: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(img)
	defer f.Close()
	tab, err := Read(f)
	if err != nil || tab.Extended != nil || len(tab.Partitions) != 2 || tab.Partitions[1].First != lay[1].First || lay[0].Bytes() != 1<<20 {
		t.Fatalf("%+v %v; wrote %+v", tab, err, lay)
	}
}

func TestRejects(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, 2<<20), 0o644)
	for name, c := range map[string]struct {
		disk  uint32
		parts []Partition
		want  string
	}{
		"five primaries":     {1, []Partition{{Name: "a", Type: 0x83, Size: 1}, {Name: "b", Type: 0x83, Size: 1}, {Name: "c", Type: 0x83, Size: 1}, {Name: "d", Type: 0x83, Size: 1}, {Name: "e", Type: 0x83, Size: 1}}, "holds 4"},
		"four and logical":   {1, []Partition{{Name: "a", Type: 0x83, Size: 1}, {Name: "b", Type: 0x83, Size: 1}, {Name: "c", Type: 0x83, Size: 1}, {Name: "d", Type: 0x83, Size: 1}, {Name: "e", Type: 0x83, Size: 1, Logical: true}}, "holds 4"},
		"primary after":      {1, []Partition{{Name: "l", Type: 0x83, Size: 1, Logical: true}, {Name: "p", Type: 0x83, Size: 1}}, "primary partition p after a logical"},
		"missing source":     {1, []Partition{{Name: "root", Type: 0x83, Src: filepath.Join(dir, "nope")}}, "partition root"},
		"source too big":     {1, []Partition{{Name: "root", Type: 0x83, Src: big, Size: 1 << 20}}, "larger than the partition"},
		"no size":            {1, []Partition{{Name: "empty", Type: 0x83}}, "partition empty has no size"},
		"extended type":      {1, []Partition{{Name: "x", Type: 0x05, Size: 1}}, "not a partition's"},
		"disk identifier 0":  {0, []Partition{{Name: "a", Type: 0x83, Size: 1}}, "identifier 0"},
		"empty type":         {1, []Partition{{Name: "a", Size: 1}}, "not a partition's"},
		"protective GPT use": {1, []Partition{{Name: "a", Type: 0xEE, Size: 1}}, "not a partition's"},
	} {
		out := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".img")
		if _, err := Write(out, c.disk, c.parts); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), out) {
			t.Errorf("%s: %v, want an error naming the image and %q", name, err, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: an image was left behind", name)
		}
	}
}

// TestReadRefuses holds Read's checks: each damage is named.
func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "d.img")
	if _, err := Write(img, 7, piParts(t, dir)); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(img)
	f, _ := os.Open(img)
	tab, err := Read(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	ebr2 := tab.Part(6).First - 2048 // root-b's EBR
	for name, c := range map[string]struct {
		damage func(b []byte) []byte
		want   string
	}{
		"short":          {func(b []byte) []byte { return b[:100] }, "shorter than one sector"},
		"no signature":   {func(b []byte) []byte { b[510] = 0; return b }, "no boot signature"},
		"protective GPT": {func(b []byte) []byte { b[446+4] = 0xEE; return b }, "GPT"},
		"overlap":        {func(b []byte) []byte { copy(b[446+16:446+32], b[446:462]); return b }, "overlaps"},
		"zero length":    {func(b []byte) []byte { clear(b[446+12 : 446+16]); return b }, "not a partition"},
		"EBR signature":  {func(b []byte) []byte { b[ebr2*512+510] = 0; return b }, "EBR of partition 6"},
		"EBR loops back": {func(b []byte) []byte { clear(b[ebr2*512+462+8 : ebr2*512+462+12]); return b }, "not a later EBR"},
		"logical outside": {func(b []byte) []byte {
			b[ebr2*512+446+12+3] = 0x40 // a size past the extended partition
			return b
		}, "not inside the extended partition"},
		"truncated chain": {func(b []byte) []byte { return b[:ebr2*512] }, "EBR of partition 6"},
	} {
		b := c.damage(bytes.Clone(good))
		if _, err := Read(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

func FuzzRead(f *testing.F) {
	dir := f.TempDir()
	img := filepath.Join(dir, "d.img")
	root := filepath.Join(dir, "root.img")
	os.WriteFile(root, []byte("R"), 0o644)
	if _, err := Write(img, 7, []Partition{{Name: "a", Type: TypeFAT32LBA, Size: 1},
		{Name: "b", Type: TypeLinux, Src: root, Logical: true}, {Name: "c", Type: TypeLinux, Size: 1, Logical: true}}); err != nil {
		f.Fatal(err)
	}
	b, _ := os.ReadFile(img)
	// The sectors that matter, squeezed together: the MBR and the two EBRs.
	f.Add(b)
	f.Add(b[:512])
	f.Fuzz(func(t *testing.T, disk []byte) {
		tab, err := Read(bytes.NewReader(disk))
		if err != nil {
			return
		}
		// Whatever reads is a table of partitions with lengths, numbered as
		// Linux numbers them, logical ones inside the extended partition.
		for _, l := range tab.Partitions {
			if l.First <= 0 || l.Last < l.First || l.Number < 1 || l.Number > 4+maxLogical {
				t.Fatalf("partition %+v", l)
			}
			if l.Number > 4 && (tab.Extended == nil || l.First <= tab.Extended.First || l.Last > tab.Extended.Last) {
				t.Fatalf("logical partition %+v outside %+v", l, tab.Extended)
			}
		}
	})
}

// TestWriteFrozen: the bytes of an image Write makes (the Pi A/B card's
// shape, a source not a whole number of sectors) are the ones pinned here,
// so a change to how the image is written cannot change a card unseen.
func TestWriteFrozen(t *testing.T) {
	dir := t.TempDir()
	parts := piParts(t, dir)
	src := make([]byte, 3<<20+1234)
	for i := range src {
		src[i] = byte(i*131 + i>>9)
	}
	if err := os.WriteFile(parts[3].Src, src, 0o644); err != nil {
		t.Fatal(err)
	}
	parts[1].Src = parts[3].Src
	img := filepath.Join(dir, "d.img")
	if _, err := Write(img, 0x6e76626f, parts); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	const want = "a85f7e139302a56b69b72b1fa9b26f5ba88e3371aef3b1427576df17fbb77eb7"
	if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != want {
		t.Errorf("image sha256 %s (%d bytes), pinned %s", got, len(b), want)
	}
}
