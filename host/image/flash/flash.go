package flash

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/format/gpt"
	"github.com/nvboot/nvboot/format/mbr"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/internal/dirsync"
)

// chunk is the unit of writing and verifying: big enough for a card's
// erase blocks, small enough for steady progress.
const chunk = 4 << 20

// Options says what to write where.
type Options struct {
	Image  string // the disk image (nvboot build's disk.img)
	Target string // a block device, or a regular file (created if missing)
	// Confirmed must be set to overwrite a block device, or a regular file
	// that holds something other than a disk image: the caller has shown
	// the user what the target is (Describe) and was told yes.
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

	// For a regular file: New when it does not exist yet (flashing creates
	// it), and what it holds (Holds) otherwise.
	New   bool
	Holds Content

	st     unix.Stat_t // as Describe found it, for the checks before writing
	majMin string      // a block device's "MAJ:MIN"
	real   string      // a regular file's path with symbolic links resolved
}

// Content is what a regular file target holds.
type Content int

const (
	Nothing   Content = iota // an empty (or new) file
	Zeros                    // nothing but zero bytes (truncate -s, dd if=/dev/zero)
	DiskImage                // a partition table: an earlier flash, or another disk image
	Other                    // anything else: not a disk image
)

// zeroCheckMax bounds how much of a file without a partition table is read
// to find it all zeros: a bigger one (that is not sparse) needs -yes. A
// variable for tests.
var zeroCheckMax int64 = 256 << 20

func (c Content) String() string {
	switch c {
	case Nothing:
		return "empty"
	case Zeros:
		return "all zeros"
	case DiskImage:
		return "a disk image (holds a partition table)"
	}
	return "not a disk image (no partition table)"
}

func (t Target) String() string {
	if !t.BlockDevice {
		if t.New {
			return t.Path + ": new regular file"
		}
		return fmt.Sprintf("%s: regular file, %s, %s", t.Path, humanBytes(t.Bytes), t.Holds)
	}
	kind := "block device"
	if t.Removable {
		kind = "removable " + kind
	}
	s := fmt.Sprintf("%s: %s, %s", t.Path, kind, humanBytes(t.Bytes))
	if t.Model != "" {
		s += ", " + t.Model
	}
	return s
}

// Describe checks that path can be flashed at all and says what it is. A
// path that does not exist is a new regular file, if its directory exists.
func Describe(path string) (Target, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); errors.Is(err, unix.ENOENT) {
		return describeNew(path)
	} else if err != nil {
		return Target{}, fmt.Errorf("flash target %s: %w", path, err)
	}
	t := Target{Path: path, st: st}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		t.Bytes = st.Size
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return Target{}, fmt.Errorf("flash target %s: %w", path, err)
		}
		t.real = real
		if t.Holds, err = fileContent(path, st.Size); err != nil {
			return Target{}, fmt.Errorf("flash target %s: %w", path, err)
		}
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

// describeNew describes a file to be created at path (which does not
// exist, not even as a dangling symbolic link): its directory must.
func describeNew(path string) (Target, error) {
	if _, err := os.Lstat(path); err == nil {
		return Target{}, fmt.Errorf("flash target %s: a symbolic link to nothing", path)
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return Target{}, fmt.Errorf("flash target %s: %w", path, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return Target{}, fmt.Errorf("flash target %s: %s is not a directory", path, filepath.Dir(path))
	}
	return Target{Path: path, New: true, real: filepath.Join(dir, filepath.Base(path))}, nil
}

// fileContent tells an empty file, one of zeros and a disk image (a
// partition table: an MBR signature with a partition entry, or a GPT header
// at LBA 1) from anything else.
func fileContent(path string, size int64) (Content, error) {
	if size == 0 {
		return Nothing, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	b := make([]byte, 1024)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, err
	}
	if hasPartitionTable(b[:n]) {
		return DiskImage, nil
	}
	zeros, err := allZeros(f, size)
	if err != nil {
		return 0, err
	}
	if zeros {
		return Zeros, nil
	}
	return Other, nil
}

// allZeros reports whether f, of size bytes, holds only zeros, reading its
// data (not its holes) up to zeroCheckMax bytes: more is reported false.
func allZeros(f *os.File, size int64) (bool, error) {
	fd := int(f.Fd())
	buf := make([]byte, 1<<20)
	var read int64
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return true, nil // only a hole from off to the end
		} else if err != nil {
			data = off // no SEEK_DATA here: all of it is data
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			hole = size
		}
		for ; data < hole; data += int64(len(buf)) {
			if read += int64(len(buf)); read > zeroCheckMax {
				return false, nil
			}
			b := buf[:min(int64(len(buf)), hole-data)]
			if _, err := f.ReadAt(b, data); err != nil {
				return false, err
			}
			if !allZero(b) {
				return false, nil
			}
		}
		off = hole
	}
	return true, nil
}

// hasPartitionTable reports whether b, the first sectors of a disk, holds
// a GPT header at LBA 1 or an MBR with at least one partition (a protective
// MBR's 0xEE entry included).
func hasPartitionTable(b []byte) bool {
	if len(b) >= 520 && string(b[512:520]) == "EFI PART" {
		return true
	}
	if len(b) < 512 || b[510] != 0x55 || b[511] != 0xAA {
		return false
	}
	for i := 0; i < 4; i++ {
		e := b[446+16*i : 446+16*(i+1)]
		// Boot flag 0x00 or 0x80, a partition type, a start and a size
		// (boot code where a table would be seldom passes all four).
		first, sectors := binary.LittleEndian.Uint32(e[8:]), binary.LittleEndian.Uint32(e[12:])
		if e[0]&0x7f == 0 && e[4] != 0 && first != 0 && sectors != 0 {
			return true
		}
	}
	return false
}

// checkFile refuses a regular file that flashing would lose: one of an
// image directory's files (always), and one that holds anything but nothing
// or a disk image (unless confirmed).
// The image directory is the target's, or the directory of the file it
// links to.
func checkFile(t Target, confirmed bool) error {
	for _, dir := range []string{filepath.Dir(t.Path), filepath.Dir(t.real)} {
		for _, f := range []string{outdir.ManifestFile, outdir.DiskFile} {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				return fmt.Errorf("flash target %s: is in the image directory %s (it holds %s), whose files the image needs; choose a target outside it",
					t.Path, dir, f)
			}
		}
	}
	if t.New || t.Holds != Other || confirmed {
		return nil
	}
	return fmt.Errorf("flash target %s: a regular file of %s that is %s; refusing to overwrite it without confirmation: name a new file, or use -yes to replace it (nvboot flash -yes)",
		t.Path, humanBytes(t.Bytes), t.Holds)
}

// Write flashes o.Image onto o.Target and verifies it. On any error before
// writing starts, the target is untouched; a regular file is replaced only
// once the new one is written and verified, so on any error it is as it was.
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
	if !t.BlockDevice {
		if err := checkFile(t, o.Confirmed); err != nil {
			return nil, err
		}
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
		// A Raspberry Pi card's MBR has no backup table to move.
		tab, merr := mbr.Read(img)
		if merr != nil {
			return nil, fmt.Errorf("flash: image %s: %w; nor an MBR disk: %v", o.Image, err, merr)
		}
		if tab.Bytes() > size {
			return nil, fmt.Errorf("flash: image %s: %d bytes, but its partitions end at byte %d: truncated", o.Image, size, tab.Bytes())
		}
		tail = nil
	}
	w := &writer{o: o, img: img, size: size, devSize: devSize, head: head, tail: tail}
	if t.BlockDevice {
		return w.device(ctx)
	}
	return w.file(ctx, t)
}

// writer writes one image onto one target.
type writer struct {
	o             Options
	img           *os.File
	size, devSize int64
	head, tail    []byte
}

func (w *writer) result(block bool) *Result {
	return &Result{Target: w.o.Target, BlockDevice: block, TargetBytes: w.devSize, ImageBytes: w.size}
}

// device writes a block device in place: the old tables wiped first, the
// new one written last.
func (w *writer) device(ctx context.Context) (*Result, error) {
	target := w.o.Target
	// O_EXCL: the kernel refuses while anything holds the device (mounted, swap, dm).
	dev, err := os.OpenFile(target, os.O_WRONLY|unix.O_EXCL, 0)
	if err != nil {
		if errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("flash target %s: in use (mounted, swap or held by another driver): %w", target, err)
		}
		return nil, fmt.Errorf("flash target %s: %w", target, err)
	}
	defer dev.Close()
	res := w.result(true)
	start := time.Now()
	if err := wipeTables(dev, w.devSize); err != nil {
		return nil, fmt.Errorf("flash target %s: wiping the old partition table: %w", target, err)
	}
	if res.SHA256, err = w.write(ctx, dev, false, "no partition table written"); err != nil {
		return nil, err
	}
	res.WriteSec = time.Since(start).Seconds()
	start = time.Now()
	if err := w.verify(ctx, target, true, res.SHA256); err != nil {
		return nil, err
	}
	res.Verified = true
	res.VerifySec = time.Since(start).Seconds()
	return res, nil
}

// file writes the image to a new file beside the target (beside the file
// it links to, if it is a symbolic link), verifies it, and renames it over
// the target: until then the target is as it was, whatever stops the flash.
func (w *writer) file(ctx context.Context, t Target) (*Result, error) {
	target := w.o.Target
	left := target + " left as it was"
	if t.New {
		left = target + " not created"
	}
	tmp, err := createBeside(t.real)
	if err != nil {
		return nil, fmt.Errorf("flash target %s: %w (%s)", target, err, left)
	}
	name := tmp.Name()
	renamed := false
	defer func() {
		tmp.Close()
		if !renamed {
			os.Remove(name)
		}
	}()
	if !t.New {
		// The new file takes the old one's place: its owner and mode too.
		if uid, gid := int(t.st.Uid), int(t.st.Gid); uid != os.Geteuid() || gid != os.Getegid() {
			_ = tmp.Chown(uid, gid) // as far as we may
		}
		if err := tmp.Chmod(os.FileMode(t.st.Mode & 0o777)); err != nil {
			return nil, fmt.Errorf("flash target %s: %w (%s)", target, err, left)
		}
	}
	res := w.result(false)
	start := time.Now()
	// The new file is all zeros, so zero chunks need no writing.
	if err := tmp.Truncate(w.devSize); err != nil {
		return nil, fmt.Errorf("flash target %s: %w (%s)", target, err, left)
	}
	if res.SHA256, err = w.write(ctx, tmp, true, left); err != nil {
		return nil, err
	}
	res.WriteSec = time.Since(start).Seconds()
	start = time.Now()
	if err := w.verify(ctx, name, false, res.SHA256); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, left)
	}
	res.Verified = true
	res.VerifySec = time.Since(start).Seconds()
	if err := unchanged(t); err != nil {
		return nil, fmt.Errorf("flash target %s: %w while it was being flashed (%s)", target, err, left)
	}
	if err := os.Rename(name, t.real); err != nil {
		return nil, fmt.Errorf("flash target %s: %w (%s)", target, err, left)
	}
	renamed = true
	if err := dirsync.Sync(filepath.Dir(t.real)); err != nil {
		return nil, fmt.Errorf("flash target %s: written and verified, but syncing its directory: %w", target, err)
	}
	return res, nil
}

// write writes the image onto dev, the partition tables last, and returns
// the sha256 of what it wrote from offset 0. sparse says dev is all zeros
// already; left says what an interrupted write leaves behind.
func (w *writer) write(ctx context.Context, dev *os.File, sparse bool, left string) (string, error) {
	target := w.o.Target
	sum := sha256.New()
	buf := make([]byte, chunk)
	// The table goes last: the partitions are complete before anything
	// points at them.
	for off := int64(0); off < w.size; off += chunk {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("flash target %s: stopped at %d of %d bytes (%s): %w", target, off, w.size, left, err)
		}
		b := buf[:min(chunk, w.size-off)]
		if _, err := w.img.ReadAt(b, off); err != nil {
			return "", fmt.Errorf("flash: image %s: %w (%s)", w.o.Image, err, left)
		}
		wb, woff := b, off
		if off == 0 {
			copy(b, w.head) // hashed as it will be, written at the end
			wb, woff = b[len(w.head):], int64(len(w.head))
		}
		sum.Write(b)
		if !sparse || !allZero(wb) {
			if _, err := dev.WriteAt(wb, woff); err != nil {
				return "", fmt.Errorf("flash target %s: writing at %d: %w (%s)", target, woff, err, left)
			}
		}
		progress(w.o, "write", off+int64(len(b)), w.size)
	}
	if _, err := dev.WriteAt(w.tail, w.devSize-int64(len(w.tail))); err != nil {
		return "", fmt.Errorf("flash target %s: backup partition table: %w (%s)", target, err, left)
	}
	if err := dev.Sync(); err != nil {
		return "", fmt.Errorf("flash target %s: sync: %w (%s)", target, err, left)
	}
	if _, err := dev.WriteAt(w.head, 0); err != nil {
		return "", fmt.Errorf("flash target %s: partition table: %w", target, err)
	}
	if err := dev.Sync(); err != nil {
		return "", fmt.Errorf("flash target %s: sync: %w", target, err)
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// verify reads what was written back from path, past the page cache, and
// compares it with what was written.
func (w *writer) verify(ctx context.Context, path string, block bool, want string) error {
	target := w.o.Target
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("flash target %s: verify: %w", target, err)
	}
	defer f.Close()
	if block {
		// Drop the device's cached pages so the read comes from the medium.
		_ = unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0)
	}
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	sum := sha256.New()
	buf := make([]byte, chunk)
	for off := int64(0); off < w.size; off += chunk {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("flash target %s: verify: %w", target, err)
		}
		b := buf[:min(chunk, w.size-off)]
		if _, err := f.ReadAt(b, off); err != nil {
			return fmt.Errorf("flash target %s: verify: reading at %d: %w", target, off, err)
		}
		sum.Write(b)
		progress(w.o, "verify", off+int64(len(b)), w.size)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != want {
		return fmt.Errorf("flash target %s: verify: read back sha256 %s, wrote %s: the device did not keep what was written", target, got, want)
	}
	back := make([]byte, len(w.tail))
	if _, err := f.ReadAt(back, w.devSize-int64(len(w.tail))); err != nil {
		return fmt.Errorf("flash target %s: verify: backup table: %w", target, err)
	}
	if !bytes.Equal(back, w.tail) {
		return fmt.Errorf("flash target %s: verify: the backup partition table did not read back as written", target)
	}
	return nil
}

// createBeside creates a new file in path's directory, named after path,
// with the mode a new file gets (0666 less the umask).
func createBeside(path string) (*os.File, error) {
	dir, base := filepath.Split(path)
	for i := 0; ; i++ {
		var r [6]byte
		rand.Read(r[:])
		f, err := os.OpenFile(filepath.Join(dir, "."+base+".flash-"+hex.EncodeToString(r[:])), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil || !errors.Is(err, fs.ErrExist) || i == 9 {
			return f, err
		}
	}
}

// unchanged checks that the target is still what Describe found: a new
// file still missing, an old one the same file, its size and time the same.
func unchanged(t Target) error {
	var st unix.Stat_t
	err := unix.Stat(t.real, &st)
	if t.New {
		if err == nil {
			return errors.New("it was created")
		}
		return nil
	}
	if err != nil || st.Dev != t.st.Dev || st.Ino != t.st.Ino || st.Size != t.st.Size || st.Mtim != t.st.Mtim {
		return errors.New("it changed")
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
