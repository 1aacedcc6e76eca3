package diskimage

import (
	"fmt"
	"io"
	"os"

	"github.com/nvboot/nvboot/internal/atomicfile"
)

const (
	// Sector is the bytes of a sector, the unit of every LBA here.
	Sector = 512
	// AlignLBAs is 1 MiB in sectors: where partitions start and what their
	// sizes round up to.
	AlignLBAs = 2048
)

// LBAs is the sectors partition name of image path takes: size bytes (0:
// the size of the file src), rounded up to 1 MiB. src "" is an empty
// partition, which needs a size.
func LBAs(path, name, src string, size int64) (int64, error) {
	if src != "" {
		st, err := os.Stat(src)
		if err != nil {
			return 0, fmt.Errorf("disk image %s: partition %s: %w", path, name, err)
		}
		if size == 0 {
			size = st.Size()
		} else if st.Size() > size {
			return 0, fmt.Errorf("disk image %s: partition %s: %s is %d bytes, larger than the partition (%d)", path, name, src, st.Size(), size)
		}
	}
	if size <= 0 {
		return 0, fmt.Errorf("disk image %s: partition %s has no size", path, name)
	}
	return (size + AlignLBAs*Sector - 1) / (AlignLBAs * Sector) * AlignLBAs, nil
}

// Table is bytes of a partition table (an MBR, an EBR, a GPT header with
// its entries) and the sector they start at.
type Table struct {
	LBA   int64
	Bytes []byte
}

// Source is a partition's contents: the file Src, copied to sector LBA.
// Name names the partition in errors.
type Source struct {
	Name, Src string
	LBA       int64
}

// Write writes the image path of lbas sectors: the tables, then the
// sources, at their sectors, zeros elsewhere. It writes a temporary file
// and renames it into place: no partial image on failure.
func Write(path string, lbas int64, tables []Table, sources []Source) error {
	tmp, err := atomicfile.Create(path)
	if err != nil {
		return fmt.Errorf("disk image %s: %w", path, err)
	}
	defer tmp.Abort()
	if err := tmp.Truncate(lbas * Sector); err != nil {
		return fmt.Errorf("disk image %s: %w", path, err)
	}
	for _, t := range tables {
		if _, err := tmp.WriteAt(t.Bytes, t.LBA*Sector); err != nil {
			return fmt.Errorf("disk image %s: %w", path, err)
		}
	}
	for _, s := range sources {
		if err := copyAt(tmp.File, s.LBA*Sector, s.Src); err != nil {
			return fmt.Errorf("disk image %s: partition %s: %w", path, s.Name, err)
		}
	}
	return tmp.Commit(0o600)
}

// copyAt copies the file src into dst from byte off.
func copyAt(dst *os.File, off int64, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if _, werr := dst.WriteAt(buf[:n], off); werr != nil {
				return werr
			}
			off += int64(n)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
