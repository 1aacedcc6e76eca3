package appliance

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/outdir"
)

// state is the fifth phase: pmem1, the state filesystem, empty; its
// gzip-compressed image on the root tree, which nvinit writes onto a blank
// state device; and the hashes of both pmem images in im, by which a
// rebuild tells whether a device has used them.
func (b *builder) state(ctx context.Context, st staging, im *Image) error {
	size, _ := stateSizes(b.Config)
	dir, img := filepath.Join(b.work, "state"), filepath.Join(b.work, "state.ext4")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b.logf("state: %d MiB ext4", size>>20)
	if err := mkExt4(ctx, dir, img, size, uuidFor(b.seed(), "state")); err != nil {
		return fmt.Errorf("state filesystem: %w", err)
	}
	// A Pi has no pmem: the filesystem goes on the card's data partition
	// (rpidisk.go).
	if b.Board == BoardPC {
		if err := b.pmemImage(outdir.StatePmemFile, img, size); err != nil {
			return err
		}
		var err error
		if im.TextSHA256, err = sha256File(filepath.Join(b.dir, outdir.TextPmemFile)); err != nil {
			return err
		}
		if im.StateSHA256, err = sha256File(filepath.Join(b.dir, outdir.StatePmemFile)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(st.root, filepath.Dir(contract.StateImage)[1:]), 0o755); err != nil {
		return err
	}
	if err := gzipFile(filepath.Join(st.root, contract.StateImage[1:]), img, 0o444); err != nil {
		return fmt.Errorf("state template: %w", err)
	}
	return nil
}

// gzipFile writes src gzip-compressed to dst with mode perm. The header has
// no name and no time: the same src gives the same bytes.
func gzipFile(dst, src string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(out, gzip.BestCompression)
	if err == nil {
		_, err = io.Copy(zw, in)
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Chmod(dst, perm)
}
