package nvinit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// The ext2/3/4 superblock fields provisioning reads (the kernel's
// Documentation/filesystems/ext4/super.rst), little-endian, as offsets into
// the superblock, which starts 1024 bytes into the filesystem.
const (
	sbOffset          = 1024
	sbBlocksCountLo   = 0x4   // le32 s_blocks_count_lo
	sbLogBlockSize    = 0x18  // le32 s_log_block_size: block size 1024 << it
	sbMagic           = 0x38  // le16 s_magic
	sbFeatureIncompat = 0x60  // le32 s_feature_incompat
	sbBlocksCountHi   = 0x150 // le32 s_blocks_count_hi, with INCOMPAT_64BIT

	ext4Magic      = 0xEF53
	incompat64Bit  = 0x80
	maxLogBlocks   = 6 // 64 KiB blocks, the largest ext4 knows
	maxImageBlocks = 1 << 40
)

// fsImage is a filesystem image read as a stream: the head (the first
// headSize bytes, the primary superblock in them) already read, the rest
// still in r. size is the filesystem's size, from its superblock.
type fsImage struct {
	head []byte
	size int64
	r    io.Reader
}

// readFSImage reads the head of an ext2/3/4 image from r.
func readFSImage(r io.Reader) (*fsImage, error) {
	head := make([]byte, headSize)
	if _, err := io.ReadFull(r, head); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("shorter than the %d-byte head a filesystem starts with", headSize)
		}
		return nil, err
	}
	size, err := ext4Size(head)
	if err != nil {
		return nil, err
	}
	return &fsImage{head: head, size: size, r: r}, nil
}

// ext4Size is the size in bytes of the filesystem whose head this is.
func ext4Size(head []byte) (int64, error) {
	le := binary.LittleEndian
	sb := head[sbOffset:]
	if m := le.Uint16(sb[sbMagic:]); m != ext4Magic {
		return 0, fmt.Errorf("no ext2/3/4 superblock (magic %#04x at byte %d, want %#04x)", m, sbOffset+sbMagic, ext4Magic)
	}
	logBS := le.Uint32(sb[sbLogBlockSize:])
	if logBS > maxLogBlocks {
		return 0, fmt.Errorf("superblock: block size 1024<<%d: not ext2/3/4", logBS)
	}
	blocks := uint64(le.Uint32(sb[sbBlocksCountLo:]))
	if le.Uint32(sb[sbFeatureIncompat:])&incompat64Bit != 0 {
		blocks |= uint64(le.Uint32(sb[sbBlocksCountHi:])) << 32
	}
	size := blocks * (1024 << logBS)
	if blocks > maxImageBlocks || size < headSize {
		return 0, fmt.Errorf("superblock: %d blocks of %d bytes: not a filesystem this can hold", blocks, 1024<<logBS)
	}
	return int64(size), nil
}

// fits checks that the filesystem fits on dev (a block device's size is where
// its end is, and a regular file standing in for one does not grow).
func (im *fsImage) fits(dev *os.File) error {
	end, err := dev.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if end < im.size {
		return fmt.Errorf("the filesystem is %d bytes (its superblock says), the device only %d", im.size, end)
	}
	return nil
}

// body is the rest of the image, exactly size-headSize bytes: a stream that
// ends early or goes on is an error, and it is read to its end, so a
// reader that checks itself there (gzip's CRC and length) does.
func (im *fsImage) body() io.Reader {
	return &exactReader{r: im.r, left: im.size - headSize, size: im.size}
}

type exactReader struct {
	r          io.Reader
	left, size int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if e.left == 0 {
		var b [1]byte
		for {
			n, err := e.r.Read(b[:])
			switch {
			case n > 0:
				return 0, fmt.Errorf("the image goes on past the %d bytes its superblock says", e.size)
			case err != nil:
				return 0, err // io.EOF: the end, where it should be
			}
		}
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF {
		err = nil
		if e.left > 0 {
			err = fmt.Errorf("the image ends %d bytes short of the %d its superblock says: %w", e.left, e.size, io.ErrUnexpectedEOF)
		}
	}
	return n, err
}

// logFunc reports a step of the boot's setup (the console, in nvinit).
type logFunc func(format string, args ...any)

func (l logFunc) printf(format string, args ...any) {
	if l != nil {
		l(format, args...)
	}
}
