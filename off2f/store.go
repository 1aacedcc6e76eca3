package off2f

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nvboot/nvboot/internal/atomicfile"
	"github.com/nvboot/nvboot/internal/dirsync"
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
// leaves either no file or the whole file, never a part. A store holds one
// machine's texts, as one loader maps from it: a text for another machine
// than the store's other texts is refused.
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
	if err := s.checkMachine(name, text); err != nil {
		return false, err
	}
	return true, WriteFileAtomic(path, text, 0o444)
}

// textMachine is the machine a text file's header page names; ok is false
// when b does not start as a text file of this version does.
func textMachine(b []byte) (m Machine, ok bool) {
	if len(b) < TextHeaderFixedSize || !bytes.Equal(b[:len(TextMagic)], TextMagic[:]) || le.Uint16(b[8:]) != Version {
		return 0, false
	}
	return Machine(le.Uint16(b[10:])), true
}

// checkMachine refuses text for another machine than the store's: the
// first other text in the store whose header page reads says which.
func (s Store) checkMachine(name string, text []byte) error {
	want, ok := textMachine(text)
	if !ok {
		return nil
	}
	des, err := os.ReadDir(s.Dir)
	if err != nil {
		return fmt.Errorf("store %s: %w", s.Dir, err)
	}
	for _, de := range des {
		if !isHashName(de.Name()) || de.Name() == name || !de.Type().IsRegular() {
			continue
		}
		f, err := os.Open(filepath.Join(s.Dir, de.Name()))
		if err != nil {
			continue
		}
		page := make([]byte, TextHeaderFixedSize)
		_, err = io.ReadFull(f, page)
		f.Close()
		have, ok := textMachine(page)
		if err != nil || !ok {
			continue
		}
		if have != want {
			return fmt.Errorf("store %s holds %v texts (%s), this text %s is for %v: a text store is one machine's, as is the loader that maps from it; put it in a store of its own", s.Dir, have, de.Name(), name, want)
		}
		return nil
	}
	return nil
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

// WriteFileAtomic writes data to path as the text store writes its files
// (atomicfile.WriteFile): through a temporary file beside it, fsynced,
// renamed into place, the directory fsynced; zero pages left as holes. An
// interrupted write leaves only a temporary file IsLeftover recognises,
// and errors name path, never the temporary file.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return atomicfile.WriteFile(path, data, perm)
}

// IsLeftover says whether name is a temporary file WriteFileAtomic (Store.Put,
// WriteManifest) leaves behind when it is interrupted, for a text file or the
// manifest: ".HASH.off2f-tmp-XXXXXXXXXXXXXXXX" or ".MANIFEST.off2f-tmp-...".
// Nothing else matches: gc removes only what does.
func IsLeftover(name string) bool {
	return atomicfile.IsTemp(name, func(base string) bool { return isHashName(base) || base == ManifestName })
}

func isHashName(s string) bool { return len(s) == 64 && isLowerHex(s) }

func isLowerHex(s string) bool {
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
	// Leftover: a temporary file of an interrupted write (GC only).
	Leftover bool `json:"leftover,omitempty"`
}

// List returns the text files in the store, sorted by name; the MANIFEST,
// leftovers of interrupted writes and directories are not listed. A
// directory holding anything else is not a text store: an error, as GC
// refuses it (an empty listing would say "a store with no text").
func (s Store) List() ([]Entry, error) {
	des, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("listing store: %w", err)
	}
	var out []Entry
	for _, de := range des {
		isText, _, err := s.classify(de)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", s.Dir, err)
		}
		if !isText {
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

// GC removes the text files that no manifest lists, and leftovers of
// interrupted writes (IsLeftover), and returns every file it removed. It
// checks everything before it removes anything, and refuses (removing
// nothing):
//   - with no manifests, or a manifest that lists no hash (empty, cut short
//     or the wrong file): that would empty the store;
//   - when every text file in the store would go: no manifest given is for
//     this store;
//   - a directory that is not a text store: one holding a file that is not a
//     text file named by its hash, the MANIFEST or a leftover (directories, as
//     lost+found or a dax-elf store's bin, are left alone);
//   - a file named by a hash that is not an OFF2F text file, when it would be
//     removed.
func (s Store) GC(manifests []string) (removed []Entry, err error) {
	if len(manifests) == 0 {
		return nil, fmt.Errorf("store gc %s: no manifest given; refusing to remove every text file", s.Dir)
	}
	need := map[string]bool{}
	for _, m := range manifests {
		set, err := ReadManifest(m)
		if err != nil {
			return nil, fmt.Errorf("store gc %s: %w", s.Dir, err)
		}
		if len(set) == 0 {
			return nil, fmt.Errorf("store gc %s: manifest %s lists no text hash (empty or cut short?); refusing: gc would remove every text file", s.Dir, m)
		}
		for h := range set {
			need[h] = true
		}
	}
	des, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("store gc: %w", err)
	}
	var drop []Entry
	texts, kept := 0, 0
	for _, de := range des {
		name := de.Name()
		path := filepath.Join(s.Dir, name)
		isText, leftover, err := s.classify(de)
		if err != nil {
			return nil, fmt.Errorf("store gc %s: %w; refusing (nothing removed)", s.Dir, err)
		}
		if !isText && !leftover {
			continue
		}
		info, err := de.Info()
		if err != nil {
			return nil, fmt.Errorf("store gc: %w", err)
		}
		if isText {
			texts++
			if need[name] {
				kept++
				continue
			}
			if err := checkTextMagic(path); err != nil {
				return nil, fmt.Errorf("store gc %s: %w; refusing: this does not look like a text store (nothing removed)", s.Dir, err)
			}
		}
		drop = append(drop, Entry{Name: name, Size: info.Size(), Leftover: leftover})
	}
	if texts > 0 && kept == 0 {
		return nil, fmt.Errorf("store gc %s: none of its %d text files is listed in %s; refusing to remove them all (wrong store or manifest?)", s.Dir, texts, strings.Join(manifests, ", "))
	}
	for _, e := range drop {
		if err := os.Remove(filepath.Join(s.Dir, e.Name)); err != nil {
			if len(removed) > 0 {
				dirsync.Sync(s.Dir)
			}
			return removed, fmt.Errorf("store gc: %w", err)
		}
		removed = append(removed, e)
	}
	if len(removed) > 0 {
		return removed, dirsync.Sync(s.Dir)
	}
	return removed, nil
}

// classify says what a store's directory entry is: a text file (a regular
// file named by its hash), a leftover of an interrupted write, or neither
// (a directory, such as lost+found or a dax-elf store's bin, or the
// MANIFEST). Anything else is an error: the directory is not a text store.
func (s Store) classify(de fs.DirEntry) (isText, leftover bool, err error) {
	name, regular := de.Name(), de.Type().IsRegular()
	switch {
	case de.IsDir(), name == ManifestName && regular:
		return false, false, nil
	case isHashName(name) && regular:
		return true, false, nil
	case IsLeftover(name) && regular:
		return false, true, nil
	}
	return false, false, fmt.Errorf("%s is not a text file (named by its 64-hex-digit hash), %s or a leftover of an interrupted write: this does not look like a text store", filepath.Join(s.Dir, name), ManifestName)
}

// checkTextMagic says whether path starts as an OFF2F text file does.
func checkTextMagic(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var magic [len(TextMagic)]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || magic != TextMagic {
		return fmt.Errorf("%s is named like a text file but is not one (no OFF2F text magic)", path)
	}
	return nil
}
