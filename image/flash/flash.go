// Package flash writes an appliance disk image onto a device (an SD card,
// eMMC, a USB stick, or a regular file standing in for one) and verifies it.
//
// It is careful in the ways dd is not: the target is checked before a byte
// is written (kind, size, not mounted, not claimed by the kernel, a block
// device only when confirmed); the old partition tables are wiped first and
// the new one written last, so an interrupted flash leaves a device without a
// table, never one whose table points at half-written partitions; the GPT
// backup moves to the end of a bigger device; and what was written is read
// back past the page cache and compared.
package flash

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/image/gpt"
)

// chunk is the unit of writing and verifying: big enough for a card's
// erase blocks, small enough for steady progress.
const chunk = 4 << 20

// Options says what to write where.
type Options struct {
	Image  string // the disk image (nvboot build's disk.img)
	Target string // a block device or an existing regular file
	// Confirmed must be set to overwrite a block device: the caller has
	// shown the user what the device is (Describe) and was told yes.
	Confirmed bool
	// Progress, if set, is called after each chunk with the bytes done and
	// the total, for writing and then for verifying.
	Progress func(stage string, done, total int64)
}

// Result is what a flash did.
type Result struct {
	Target      string  `json:"target"`
	BlockDevice bool    `json:"block_device"`
	TargetBytes int64   `json:"target_bytes"`
	ImageBytes  int64   `json:"image_bytes"`
	SHA256      string  `json:"sha256"` // of the bytes written at offset 0 (the image with its table fitted to the target)
	Verified    bool    `json:"verified"`
	WriteSec    float64 `json:"write_seconds"`
	VerifySec   float64 `json:"verify_seconds"`
}

// Target describes a flash target before anything is written.
type Target struct {
	Path        string
	BlockDevice bool
	Bytes       int64
	Model       string // from sysfs, for block devices; may be empty
	Removable   bool

	st     unix.Stat_t // as Describe found it, for the checks before writing
	majMin string      // a block device's "MAJ:MIN"
}

func (t Target) String() string {
	kind := "regular file"
	if t.BlockDevice {
		kind = "block device"
		if t.Removable {
			kind = "removable " + kind
		}
	}
	s := fmt.Sprintf("%s: %s, %s", t.Path, kind, humanBytes(t.Bytes))
	if t.Model != "" {
		s += ", " + t.Model
	}
	return s
}

// Describe checks that path can be flashed at all and says what it is.
func Describe(path string) (Target, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return Target{}, fmt.Errorf("flash target %s: %w", path, err)
	}
	t := Target{Path: path, st: st}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		t.Bytes = st.Size
	case unix.S_IFBLK:
		t.BlockDevice = true
		f, err := os.Open(path)
		if err != nil {
			return Target{}, fmt.Errorf("flash target %s: %w", path, err)
		}
		n, err := f.Seek(0, io.SeekEnd) // a block device's size
		f.Close()
		if err != nil {
			return Target{}, fmt.Errorf("flash target %s: size: %w", path, err)
		}
		t.Bytes = n
		t.majMin = fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		sys := "/sys/dev/block/" + t.majMin
		t.Model = strings.TrimSpace(readSmall(filepath.Join(sys, "device", "model")))
		t.Removable = strings.TrimSpace(readSmall(filepath.Join(sys, "removable"))) == "1"
	default:
		return Target{}, fmt.Errorf("flash target %s: not a block device or a regular file", path)
	}
	return t, nil
}

// Write flashes o.Image onto o.Target and verifies it. On any error before
// writing starts, the target is untouched.
func Write(ctx context.Context, o Options) (*Result, error) {
	img, err := os.Open(o.Image)
	if err != nil {
		return nil, fmt.Errorf("flash: image: %w", err)
	}
	defer img.Close()
	ist, err := img.Stat()
	if err != nil {
		return nil, fmt.Errorf("flash: image: %w", err)
	}
	size := ist.Size()
	if size < gpt.HeadBytes || size%512 != 0 {
		return nil, fmt.Errorf("flash: image %s: %d bytes is not a disk image", o.Image, size)
	}
	t, err := Describe(o.Target)
	if err != nil {
		return nil, err
	}
	if err := checkNotSelf(o.Image, t); err != nil {
		return nil, err
	}
	if t.BlockDevice && !o.Confirmed {
		return nil, fmt.Errorf("flash target %s: refusing to overwrite a block device without confirmation (nvboot flash -yes)", t)
	}
	devSize := t.Bytes
	if !t.BlockDevice && devSize < size {
		devSize = size // a file grows to hold the image
	}
	if devSize < size {
		return nil, fmt.Errorf("flash target %s: %s, smaller than the image (%s)", t.Path, humanBytes(devSize), humanBytes(size))
	}
	devSize &^= 511
	if err := checkUnmounted(t); err != nil {
		return nil, err
	}
	head := make([]byte, gpt.HeadBytes)
	if _, err := img.ReadAt(head, 0); err != nil {
		return nil, fmt.Errorf("flash: image %s: %w", o.Image, err)
	}
	tail, err := gpt.Fit(head, devSize)
	if err != nil {
		return nil, fmt.Errorf("flash: image %s: %w", o.Image, err)
	}

	flags := os.O_WRONLY
	if t.BlockDevice {
		flags |= unix.O_EXCL // the kernel refuses while anything holds the device (mounted, swap, dm)
	}
	dev, err := os.OpenFile(o.Target, flags, 0)
	if err != nil {
		if errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("flash target %s: in use (mounted, swap or held by another driver): %w", o.Target, err)
		}
		return nil, fmt.Errorf("flash target %s: %w", o.Target, err)
	}
	defer dev.Close()
	res := &Result{Target: o.Target, BlockDevice: t.BlockDevice, TargetBytes: devSize, ImageBytes: size}

	start := time.Now()
	if !t.BlockDevice {
		// A file starts over as zeros, so zero chunks need no writing.
		if err := dev.Truncate(0); err != nil {
			return nil, fmt.Errorf("flash target %s: %w", o.Target, err)
		}
		if err := dev.Truncate(devSize); err != nil {
			return nil, fmt.Errorf("flash target %s: %w", o.Target, err)
		}
	} else if err := wipeTables(dev, devSize); err != nil {
		return nil, fmt.Errorf("flash target %s: wiping the old partition table: %w", o.Target, err)
	}
	sum := sha256.New()
	buf := make([]byte, chunk)
	// The table goes last: the partitions are complete before anything
	// points at them.
	for off := int64(0); off < size; off += chunk {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("flash target %s: stopped at %d of %d bytes (no partition table written): %w", o.Target, off, size, err)
		}
		b := buf[:min(chunk, size-off)]
		if _, err := img.ReadAt(b, off); err != nil {
			return nil, fmt.Errorf("flash: image %s: %w", o.Image, err)
		}
		wb, woff := b, off
		if off == 0 {
			copy(b, head) // hashed as it will be, written at the end
			wb, woff = b[len(head):], int64(len(head))
		}
		sum.Write(b)
		if t.BlockDevice || !allZero(wb) {
			if _, err := dev.WriteAt(wb, woff); err != nil {
				return nil, fmt.Errorf("flash target %s: writing at %d: %w (no partition table written)", o.Target, woff, err)
			}
		}
		progress(o, "write", off+int64(len(b)), size)
	}
	if _, err := dev.WriteAt(tail, devSize-int64(len(tail))); err != nil {
		return nil, fmt.Errorf("flash target %s: backup partition table: %w", o.Target, err)
	}
	if err := dev.Sync(); err != nil {
		return nil, fmt.Errorf("flash target %s: sync: %w", o.Target, err)
	}
	if _, err := dev.WriteAt(head, 0); err != nil {
		return nil, fmt.Errorf("flash target %s: partition table: %w", o.Target, err)
	}
	if err := dev.Sync(); err != nil {
		return nil, fmt.Errorf("flash target %s: sync: %w", o.Target, err)
	}
	res.WriteSec = time.Since(start).Seconds()
	res.SHA256 = hex.EncodeToString(sum.Sum(nil))

	start = time.Now()
	if err := verify(ctx, o, t.BlockDevice, size, devSize, res.SHA256, tail); err != nil {
		return nil, err
	}
	res.Verified = true
	res.VerifySec = time.Since(start).Seconds()
	return res, nil
}

// verify reads the target back, past the page cache, and compares it with
// what was written.
func verify(ctx context.Context, o Options, block bool, size, devSize int64, want string, tail []byte) error {
	f, err := os.Open(o.Target)
	if err != nil {
		return fmt.Errorf("flash target %s: verify: %w", o.Target, err)
	}
	defer f.Close()
	if block {
		// Drop the device's cached pages so the read comes from the medium.
		_ = unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0)
	}
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	sum := sha256.New()
	buf := make([]byte, chunk)
	for off := int64(0); off < size; off += chunk {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("flash target %s: verify: %w", o.Target, err)
		}
		b := buf[:min(chunk, size-off)]
		if _, err := f.ReadAt(b, off); err != nil {
			return fmt.Errorf("flash target %s: verify: reading at %d: %w", o.Target, off, err)
		}
		sum.Write(b)
		progress(o, "verify", off+int64(len(b)), size)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != want {
		return fmt.Errorf("flash target %s: verify: read back sha256 %s, wrote %s: the device did not keep what was written", o.Target, got, want)
	}
	back := make([]byte, len(tail))
	if _, err := f.ReadAt(back, devSize-int64(len(tail))); err != nil {
		return fmt.Errorf("flash target %s: verify: backup table: %w", o.Target, err)
	}
	if !bytes.Equal(back, tail) {
		return fmt.Errorf("flash target %s: verify: the backup partition table did not read back as written", o.Target)
	}
	return nil
}

// wipeTables zeroes the old primary and backup GPT (and the MBR) first, so
// that until the new table is written the device has none.
func wipeTables(dev *os.File, devSize int64) error {
	z := make([]byte, gpt.HeadBytes)
	if _, err := dev.WriteAt(z, 0); err != nil {
		return err
	}
	if devSize > 2*gpt.HeadBytes {
		if _, err := dev.WriteAt(z[:gpt.HeadBytes-512], devSize-int64(gpt.HeadBytes-512)); err != nil {
			return err
		}
	}
	return dev.Sync()
}

// checkUnmounted refuses a block device that is, or holds, a mounted
// filesystem, naming the mount point: O_EXCL would refuse too, but say less.
func checkUnmounted(t Target) error {
	if !t.BlockDevice {
		return nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("flash: checking mounts: %w", err)
	}
	defer f.Close()
	disk := blockName(t.majMin)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		dev, mnt := fields[2], fields[4]
		if dev == t.majMin {
			return fmt.Errorf("flash target %s: mounted on %s; unmount it first", t.Path, mnt)
		}
		if disk != "" && parentName(dev) == disk {
			return fmt.Errorf("flash target %s: its partition %s is mounted on %s; unmount it first", t.Path, blockName(dev), mnt)
		}
	}
	return sc.Err()
}

// checkNotSelf refuses flashing an image onto itself or onto the device
// (or a partition of the disk) that holds it.
func checkNotSelf(image string, t Target) error {
	var is unix.Stat_t
	if unix.Stat(image, &is) != nil {
		return nil
	}
	if !t.BlockDevice {
		if is.Dev == t.st.Dev && is.Ino == t.st.Ino {
			return fmt.Errorf("flash target %s: is the image itself", t.Path)
		}
		return nil
	}
	holder := fmt.Sprintf("%d:%d", unix.Major(is.Dev), unix.Minor(is.Dev))
	if p := parentName(holder); holder == t.majMin || p != "" && p == blockName(t.majMin) {
		return fmt.Errorf("flash target %s: holds the image %s", t.Path, image)
	}
	return nil
}

// blockName is the kernel's name of the block device MAJ:MIN ("sdb1").
func blockName(majMin string) string {
	l, err := os.Readlink("/sys/dev/block/" + majMin)
	if err != nil {
		return ""
	}
	return filepath.Base(l)
}

// parentName is the whole disk of partition MAJ:MIN ("sdb"), or "".
func parentName(majMin string) string {
	if _, err := os.Stat("/sys/dev/block/" + majMin + "/partition"); err != nil {
		return ""
	}
	l, err := os.Readlink("/sys/dev/block/" + majMin)
	if err != nil {
		return ""
	}
	return filepath.Base(filepath.Dir(l))
}

func progress(o Options, stage string, done, total int64) {
	if o.Progress != nil {
		o.Progress(stage, done, total)
	}
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func readSmall(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
