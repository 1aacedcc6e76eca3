package appliance

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/image/gpt"
)

// CheckDisk checks the disk image of the image in dir before a boot: it has
// a valid partition table, it is as long as that table says (the backup
// header at its end, every partition inside it), and the partitions are
// where image.json says. A disk.img cut short (a copy interrupted, a full
// disk) otherwise boots into a kernel panic: the kernel finds no partition
// table, or no root partition. Nothing is written.
func CheckDisk(dir string, im *Image) error {
	path := filepath.Join(dir, im.Disk)
	rebuild := fmt.Sprintf("rebuild it with nvboot build -o %s (the device's state is kept)", dir)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("image %s: disk image: %w", dir, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("image %s: disk image: %w", dir, err)
	}
	size := st.Size()
	tab, err := gpt.Read(f)
	if err != nil {
		what := fmt.Sprintf("%d bytes", size)
		if size == 0 {
			what = "empty"
		}
		return fmt.Errorf("image %s: %s (%s): %v: not the disk image nvboot build wrote, or damaged; %s", dir, path, what, err, rebuild)
	}
	for _, p := range tab.Partitions {
		if end := (p.Last + 1) * 512; end > size {
			return fmt.Errorf("image %s: %s is %d bytes, but its partition %s ends at byte %d: truncated (%d bytes missing); %s",
				dir, path, size, p.Name, end, tab.Bytes()-size, rebuild)
		}
	}
	if tab.Bytes() > size {
		return fmt.Errorf("image %s: %s is %d bytes, but its partition table puts the backup table at its end, byte %d: truncated (%d bytes missing); %s",
			dir, path, size, tab.Bytes(), tab.Bytes()-size, rebuild)
	}
	// image.json says where each partition is: the disk must be that
	// build's.
	for i, want := range im.Partitions {
		if i >= len(tab.Partitions) {
			return fmt.Errorf("image %s: %s says partition %d is %s, but %s's table has %d partitions: the disk is not the one image.json describes; %s",
				dir, ManifestFile, i+1, want.Name, path, len(tab.Partitions), rebuild)
		}
		p := tab.Partitions[i]
		off, n := p.First*512, (p.Last-p.First+1)*512
		if p.Name != want.Name || off != want.Offset || n != want.Bytes {
			return fmt.Errorf("image %s: %s says partition %d is %s at byte %d, %d bytes, but %s's table has %s at byte %d, %d bytes: the disk is not the one image.json describes; %s",
				dir, ManifestFile, i+1, want.Name, want.Offset, want.Bytes, path, p.Name, off, n, rebuild)
		}
	}
	return nil
}
