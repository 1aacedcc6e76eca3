package update

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"syscall"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/internal/atomicfile"
	"github.com/nvboot/nvboot/internal/dirsync"
	"github.com/nvboot/nvboot/off2f"
)

// Clean copies of deployed texts. The text store is pmem, and what a
// damaged text is repaired from must lie elsewhere: an image's texts have
// their copies on the root filesystem (contract.FallbackDir), a deployed
// text the image lacks gets one on the state filesystem (CleanSubdir),
// written, fsynced and checked against its hash before the program that
// names it is written. The program names its copy as the image's programs
// do, by its note's fallback directory (off2f.WithFallbackDir), so the
// loader falls back to it and nvinit's text repair restores from it; the
// repair hashes it first and never restores from a damaged copy.

// CleanSubdir is where, under the state filesystem's mount point, the
// clean copies of deployed texts are kept, each named by its hash.
const CleanSubdir = "nvboot/off2f"

// CleanDirIn is the directory of deployed texts' clean copies on a state
// filesystem mounted at stateDir.
func CleanDirIn(stateDir string) string { return filepath.Join(stateDir, CleanSubdir) }

// imageFallback is the directory of the image's own clean copies.
func (p *Programs) imageFallback() string { return cmp.Or(p.ImageFallback, contract.FallbackDir) }

// hasCleanCopy says whether text name has a clean copy on this appliance:
// the image's, or one kept for a deploy. Only its presence: a copy is read
// (and hashed) when a deploy or a repair uses it.
func (p *Programs) hasCleanCopy(name string) bool {
	if isRegular(filepath.Join(p.imageFallback(), name)) {
		return true
	}
	return p.CleanDir != "" && isRegular(filepath.Join(p.CleanDir, name))
}

func isRegular(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// cleanCopy makes sure the text the header names has a sound clean copy
// off the text store before anything of the deploy is written there, and
// returns the directory the program's note is to name. The image's copy
// is named as it is, unread (the root is read-only and slow to read; the
// repair checks it before use). Otherwise a copy kept from an earlier
// deploy is hashed and kept when sound; else one is written from the
// staged upload, or with no upload from the store's own text, hashed as it
// is copied: a damaged source writes nothing.
func (p *Programs) cleanCopy(hdr *off2f.Header, staged *stagedText) (string, error) {
	name := off2f.HashName(hdr.Note.Hash)
	if staged == nil && !isRegular(filepath.Join(p.dir(), name)) {
		return "", errorf(http.StatusConflict, "the store lacks text %s and the upload did not carry it; nothing was switched", name)
	}
	if img := p.imageFallback(); isRegular(filepath.Join(img, name)) {
		return img, nil
	}
	if p.CleanDir == "" {
		return "", errorf(http.StatusConflict, "text %s: the image has no copy of it, and no clean copy of it can be kept: the state filesystem is not mounted (see this boot's console); a deployed text is kept only with a clean copy to repair it from; nothing was switched", name)
	}
	dst := filepath.Join(p.CleanDir, name)
	kept := checkTextFile(hdr, dst)
	if kept == nil {
		return p.CleanDir, nil
	}
	src := filepath.Join(p.dir(), name)
	if staged != nil {
		src = staged.path
	}
	if err := copyText(hdr, src, dst); err != nil {
		var bad *badText
		switch {
		case errors.As(err, &bad) && staged == nil:
			// A damaged copy is of no use, and while it is there the
			// host is told the text is held (have) and never sends it.
			gone := ""
			if rerr := os.Remove(dst); rerr == nil || errors.Is(rerr, fs.ErrNotExist) {
				gone = ": the same deploy again sends the text"
			}
			return "", errorf(http.StatusConflict, "text %s: the store's copy is damaged (%v) and it has no sound clean copy (%s: %v); nothing was switched%s", name, bad.err, dst, kept, gone)
		case errors.Is(err, syscall.ENOSPC):
			return "", errorf(http.StatusInsufficientStorage, "keeping the clean copy of text %s: %w; the state filesystem is full: remove what no service runs (nvboot deploy -gc), or build the image with a larger StateMiB; nothing was switched", name, err)
		}
		return "", errorf(http.StatusInternalServerError, "keeping the clean copy of text %s: %w; nothing was switched", name, err)
	}
	return p.CleanDir, nil
}

// badText is a source text that is not the one its header names.
type badText struct{ err error }

func (e *badText) Error() string { return e.err.Error() }

// checkTextFile hashes the text file at path and checks it is the one hdr
// names: "missing" when there is none.
func checkTextFile(hdr *off2f.Header, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("missing")
	}
	if err != nil {
		return err
	}
	defer f.Close()
	c := &textCheck{}
	if _, err := io.Copy(c, f); err != nil {
		return err
	}
	return c.matches(hdr)
}

// matches is the whole text's check against its header page and the
// program's note.
func (c *textCheck) matches(hdr *off2f.Header) error {
	th, err := c.result()
	if err != nil {
		return err
	}
	return hdr.CheckText(th)
}

// copyText copies the text file src to dst (atomically, fsynced, the
// directories it creates too), hashing it on the way: a src that is not
// the text hdr names leaves nothing (a *badText). Zero pages stay holes.
func copyText(hdr *off2f.Header, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := mkdirSynced(filepath.Dir(dst)); err != nil {
		return err
	}
	out, err := atomicfile.Create(dst)
	if err != nil {
		return err
	}
	defer out.Abort()
	c := &textCheck{}
	buf := make([]byte, defaultUploadBuffer)
	var off int64
	for {
		n, err := io.ReadFull(in, buf)
		c.Write(buf[:n])
		if werr := writeSparseAt(out.File, buf[:n], off); werr != nil {
			return werr
		}
		off += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", src, err)
		}
	}
	if err := c.matches(hdr); err != nil {
		return &badText{fmt.Errorf("%s: %w", src, err)}
	}
	if err := out.Truncate(off); err != nil {
		return err
	}
	return out.Commit(0o444)
}

// mkdirSynced makes dir and the parents it lacks, each new entry made
// durable (its parent fsynced), so a copy committed inside it survives a
// power cut with its path.
func mkdirSynced(dir string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent == dir {
		return fmt.Errorf("%s does not exist", dir)
	}
	if err := mkdirSynced(parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return dirsync.Sync(parent)
}

// gcCleanCopies removes the clean copies no kept program's text needs
// (keep, by hash), and the leftovers of interrupted copies, returning what
// it removed and its bytes. Anything else in the directory is left alone.
func (p *Programs) gcCleanCopies(keep map[string]bool) (removed []string, size int64, err error) {
	if p.CleanDir == "" {
		return nil, 0, nil
	}
	des, err := os.ReadDir(p.CleanDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	for _, de := range des {
		name := de.Name()
		if !de.Type().IsRegular() || !(contract.IsTextHash(name) && !keep[name] || off2f.IsLeftover(name)) {
			continue
		}
		path := filepath.Join(p.CleanDir, name)
		st, err := os.Lstat(path)
		if err != nil {
			return removed, size, err
		}
		if err := os.Remove(path); err != nil {
			return removed, size, err
		}
		removed, size = append(removed, path), size+st.Size()
	}
	if len(removed) > 0 {
		return removed, size, dirsync.Sync(p.CleanDir)
	}
	return nil, 0, nil
}
