package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/internal/dirsync"
)

// TempMark names the temporary files: "." + the final name + TempMark +
// 16 lowercase hex digits. off2f's store gc removes the ones an
// interrupted write left by it (off2f.IsLeftover).
const TempMark = ".off2f-tmp-"

// File is a new file being written beside its final path. Write it
// through the embedded *os.File (WriteAt, Truncate...), then Commit; defer
// Abort to remove it when something fails first.
type File struct {
	*os.File
	path string
	done bool
}

// Create starts a new file for path, whose directory must exist. Errors
// name path, never the temporary file.
func Create(path string) (*File, error) {
	dir := filepath.Dir(path)
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("writing %s: it is a directory", path)
	}
	if st, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("writing %s: directory %s does not exist", path, dir)
		}
		return nil, fmt.Errorf("writing %s: %w", path, bareErr(err))
	} else if !st.IsDir() {
		return nil, fmt.Errorf("writing %s: %s is not a directory", path, dir)
	}
	for range 100 {
		name := filepath.Join(dir, fmt.Sprintf(".%s%s%016x", filepath.Base(path), TempMark, rand.Uint64()))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, bareErr(err))
		}
		return &File{File: f, path: path}, nil
	}
	return nil, fmt.Errorf("writing %s: no free temporary name in %s", path, dir)
}

// Commit puts the file in place with mode perm: chmod, fsync, close,
// rename over the path, fsync the directory. On an error the temporary
// file is removed.
func (f *File) Commit(perm os.FileMode) (err error) {
	defer func() {
		if err != nil {
			f.Abort()
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("writing %s: %w", f.path, bareErr(err))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("writing %s: fsync: %w", f.path, bareErr(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", f.path, bareErr(err))
	}
	if err := os.Rename(f.Name(), f.path); err != nil {
		return fmt.Errorf("writing %s: %w", f.path, bareErr(err))
	}
	f.done = true
	return dirsync.Sync(filepath.Dir(f.path))
}

// Abort removes the temporary file unless Commit renamed it: deferred
// after Create, it cleans up whatever failed in between.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.Close()
	os.Remove(f.Name())
}

// WriteFile writes data to path atomically with mode perm. Zero 4 KiB
// pages are left as holes, so 2 MiB-aligned OFF2F text costs no space
// for its padding.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := writeSparse(f.File, data); err != nil {
		return fmt.Errorf("writing %s: %w", path, bareErr(err))
	}
	return f.Commit(perm)
}

const page = 4096

func writeSparse(f *os.File, data []byte) error {
	var zero [page]byte
	for off := 0; off < len(data); off += page {
		chunk := data[off:min(off+page, len(data))]
		if len(chunk) == page && bytes.Equal(chunk, zero[:]) {
			continue
		}
		if _, err := f.WriteAt(chunk, int64(off)); err != nil {
			return err
		}
	}
	return f.Truncate(int64(len(data)))
}

// IsTemp says whether name (a base name) is one of this package's
// temporary files for a file whose name base accepts.
func IsTemp(name string, base func(string) bool) bool {
	rest, ok := strings.CutPrefix(name, ".")
	if !ok {
		return false
	}
	i := strings.LastIndex(rest, TempMark)
	if i < 0 || !base(rest[:i]) {
		return false
	}
	hex := rest[i+len(TempMark):]
	return len(hex) == 16 && strings.Trim(hex, "0123456789abcdef") == ""
}

// bareErr drops the file name an *os.PathError or *os.LinkError carries:
// the caller names the file the user knows, not a temporary one.
func bareErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
