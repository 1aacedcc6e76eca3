package off2f

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ManifestName is the file at the root of a text store that lists the hashes the
// installed image needs, one per line. nvinit provisions a store by copying
// a whole filesystem image with its superblock written last, so a store cut
// short never mounts and never shows a MANIFEST.
const ManifestName = "MANIFEST"

// Store is a directory of text files named by content hash.
type Store struct{ Dir string }

// Put stores a text file under its hash. Identical text is stored once: if the
// name exists with the right size and header it is kept. The write is atomic
// (temp file, fsync, rename, fsync of the directory), so a crash or a full disk
// leaves either no file or the whole file, never a part.
func (s Store) Put(name string, text []byte) (written bool, err error) {
	if !isHashName(name) {
		return false, fmt.Errorf("store %s: %q is not a text file name (64 hex digits)", s.Dir, name)
	}
	path := filepath.Join(s.Dir, name)
	if same, err := sameText(path, text); err != nil {
		return false, err
	} else if same {
		return false, nil
	}
	return true, WriteFileAtomic(path, text, 0o444)
}

func sameText(path string, text []byte) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() != int64(len(text)) {
		return false, nil
	}
	page := make([]byte, TextHeaderSize)
	if _, err := f.ReadAt(page, 0); err != nil {
		return false, nil
	}
	return bytes.Equal(page, text[:TextHeaderSize]), nil
}

// WriteFileAtomic writes data to path through a temporary file in the same
// directory: write, fsync, rename, fsync the directory. Zero pages are left as
// holes, so 2 MiB-aligned text costs no space for its padding.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = writeSparse(tmp, data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = tmp.Chmod(perm); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: fsync: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return syncDir(dir)
}

func writeSparse(f *os.File, data []byte) error {
	var zero [PageSize]byte
	for off := 0; off < len(data); off += PageSize {
		chunk := data[off:min(off+PageSize, len(data))]
		if len(chunk) == PageSize && bytes.Equal(chunk, zero[:]) {
			continue
		}
		if _, err := f.WriteAt(chunk, int64(off)); err != nil {
			return err
		}
	}
	return f.Truncate(int64(len(data)))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

func isHashName(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Entry is one text file in a store.
type Entry struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// List returns the text files in the store, sorted by name. Temporary files of
// interrupted writes and other names are not text files and are not listed.
func (s Store) List() ([]Entry, error) {
	des, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("listing store: %w", err)
	}
	var out []Entry
	for _, de := range des {
		if !de.Type().IsRegular() || !isHashName(de.Name()) {
			continue
		}
		info, err := de.Info()
		if err != nil {
			return nil, fmt.Errorf("listing store: %w", err)
		}
		out = append(out, Entry{Name: de.Name(), Size: info.Size()})
	}
	return out, nil
}

// ReadManifest reads a manifest: one hash per line; blank lines and lines
// starting with # are ignored. Any other line is an error naming it.
func ReadManifest(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	return ParseManifest(path, b)
}

// ParseManifest parses manifest bytes (as ReadManifest); name is used in
// errors. A store's manifest comes from a device that may hold anything, so
// every malformed input is an error, never a partial set.
func ParseManifest(name string, b []byte) (map[string]bool, error) {
	need := map[string]bool{}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !isHashName(line) {
			if len(line) > 80 {
				line = line[:80] + "..."
			}
			return nil, fmt.Errorf("manifest %s:%d: %q is not a text hash (64 hex digits)", name, n+1, line)
		}
		need[line] = true
	}
	return need, nil
}

// WriteManifest writes the sorted set of hashes atomically.
func WriteManifest(path string, hashes []string) error {
	sorted := append([]string(nil), hashes...)
	sort.Strings(sorted)
	var b bytes.Buffer
	for i, h := range sorted {
		if !isHashName(h) {
			return fmt.Errorf("writing manifest %s: %q is not a text hash", path, h)
		}
		if i > 0 && sorted[i-1] == h {
			continue
		}
		b.WriteString(h + "\n")
	}
	return WriteFileAtomic(path, b.Bytes(), 0o644)
}

// GC removes the text files that no manifest lists, and leftovers of interrupted
// writes. With no manifests it refuses: that would empty the store.
func (s Store) GC(manifests []string) (removed []Entry, err error) {
	if len(manifests) == 0 {
		return nil, fmt.Errorf("store gc %s: no manifest given; refusing to remove every text file", s.Dir)
	}
	need := map[string]bool{}
	for _, m := range manifests {
		set, err := ReadManifest(m)
		if err != nil {
			return nil, err
		}
		for h := range set {
			need[h] = true
		}
	}
	entries, err := s.List()
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if need[e.Name] {
			continue
		}
		if err := os.Remove(filepath.Join(s.Dir, e.Name)); err != nil {
			return removed, fmt.Errorf("store gc: %w", err)
		}
		removed = append(removed, e)
	}
	tmps, _ := filepath.Glob(filepath.Join(s.Dir, ".*.tmp*"))
	for _, t := range tmps {
		if err := os.Remove(t); err != nil {
			return removed, fmt.Errorf("store gc: %w", err)
		}
	}
	if len(removed) > 0 || len(tmps) > 0 {
		return removed, syncDir(s.Dir)
	}
	return removed, nil
}
