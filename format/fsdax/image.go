package fsdax

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"github.com/nvboot/nvboot/internal/atomicfile"
)

// WriteImage writes a pmem image of size bytes to path: the PFN info block,
// then the filesystem image fsImage at the data offset (so the guest's
// /dev/pmemN is that filesystem). The pfn uuid is derived from the
// filesystem's bytes: the same inputs give the same image. The image is
// written to a temporary file beside path and renamed into place, so a
// failure leaves no partial image. Holes stay holes.
func WriteImage(path string, size int64, fsImage string) error {
	src, err := os.Open(fsImage)
	if err != nil {
		return fmt.Errorf("pmem image %s: %w", path, err)
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(h, src); err != nil {
		return fmt.Errorf("pmem image %s: reading %s: %w", path, fsImage, err)
	}
	var uuid [16]byte
	copy(uuid[:], h.Sum(nil))
	uuid[6] = uuid[6]&0x0f | 0x50 // a name-based (v5-style) uuid
	uuid[8] = uuid[8]&0x3f | 0x80
	in, err := NewInfo(size, uuid)
	if err != nil {
		return fmt.Errorf("pmem image %s: %w", path, err)
	}
	room := size - int64(in.DataOff)
	if st.Size() > room {
		return fmt.Errorf("pmem image %s: %s is %d MiB, the %d MiB image holds %d MiB after its metadata: make the image larger",
			path, fsImage, (st.Size()+(1<<20)-1)>>20, size>>20, room>>20)
	}
	tmp, err := atomicfile.Create(path)
	if err != nil {
		return fmt.Errorf("pmem image %s: %w", path, err)
	}
	defer tmp.Abort()
	if err := tmp.Truncate(size); err != nil {
		return fmt.Errorf("pmem image %s: %w", path, err)
	}
	if _, err := tmp.WriteAt(in.Marshal(), InfoOffset); err != nil {
		return fmt.Errorf("pmem image %s: %w", path, err)
	}
	if err := copySparse(tmp.File, int64(in.DataOff), src); err != nil {
		return fmt.Errorf("pmem image %s: copying %s: %w", path, fsImage, err)
	}
	return tmp.Commit(0o600)
}

// copySparse copies src to dst at off, skipping all-zero 64 KiB blocks (dst
// is freshly truncated, so they stay holes).
func copySparse(dst *os.File, off int64, src *os.File) error {
	buf := make([]byte, 64<<10)
	var pos int64
	for {
		n, err := src.ReadAt(buf, pos)
		if n > 0 && !allZero(buf[:n]) {
			if _, werr := dst.WriteAt(buf[:n], off+pos); werr != nil {
				return werr
			}
		}
		pos += int64(n)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// ReadInfo reads and checks the info block of the pmem image at path.
func ReadInfo(path string) (*Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, InfoSize)
	if _, err := f.ReadAt(b, InfoOffset); err != nil {
		return nil, fmt.Errorf("pmem image %s: %w", path, err)
	}
	in, err := Parse(b, st.Size())
	if err != nil {
		return nil, fmt.Errorf("pmem image %s: %w", path, err)
	}
	return in, nil
}
