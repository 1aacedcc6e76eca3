package nvinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/off2f"
)

// textRepair checks an OFF2F program's text in the store against its
// content hash, and rewrites a damaged one from the clean copy its note
// names (the fallback the loader would use): the image's on the root
// filesystem, or for a deployed text the image lacks the one the update
// endpoint keeps on the state filesystem (update.CleanSubdir).
//
// The store is content-addressed: a text file is named by the SHA-256 its
// header records (off2f.TextHash over the segment table and the bytes), and
// the program's note carries the same hash. A service's loader checks only
// the header page against the note at each start, which is why a damaged
// body is mapped and run; a check here reads the whole text, so it is made
// only when a service failed (see supervisor), or for nvinit's own text
// when its loader ran the clean copy (repairOwnText), never at every boot.
type textRepair struct {
	// Store is the mounted text store: only texts in its Dir are checked,
	// and it is remounted read-write for the time of a repair.
	Store   contract.TextStore
	Mounter mounter
	// ReadOnly: the store's device is read-only (shared among
	// appliances): texts are checked, never rewritten.
	ReadOnly bool
}

// CheckText: see textChecker. An error with a zero Repaired means the text
// was left as it was; with Repaired set, the repair is done and only what
// came after it (the remount read-only) failed.
func (r *textRepair) CheckText(program string) (textCheck, error) {
	raw, err := os.ReadFile(program)
	if err != nil {
		return textCheck{}, nil // not started from here either: nothing to check
	}
	h, err := off2f.ParseHeader(raw)
	if err != nil {
		return textCheck{}, nil // not an OFF2F program
	}
	dir := r.Store.DirOrDefault()
	if filepath.Clean(h.Note.StoreDir) != filepath.Clean(dir) {
		return textCheck{}, nil
	}
	name := off2f.HashName(h.Note.Hash)
	c := textCheck{Text: filepath.Join(dir, name)}
	c.Damage = checkText(h, c.Text)
	if c.Damage == nil {
		return c, nil
	}
	if h.Note.FallbackDir == "" {
		return c, errors.New("the program names no clean copy (its note has no fallback directory)")
	}
	if r.ReadOnly {
		return c, fmt.Errorf("the store %s is read-only (the host shares it among appliances): the text is left as it is", r.Store.Device)
	}
	clean := filepath.Join(h.Note.FallbackDir, name)
	text, err := readText(h, clean)
	if err != nil {
		// Hashed before use: a damaged copy would only replace one
		// damage by another.
		if errors.Is(err, errMissing) {
			return c, fmt.Errorf("its clean copy %s is missing: the text is left as it is", clean)
		}
		return c, fmt.Errorf("its clean copy %s is damaged too (%w): not used, the text is left as it is", clean, err)
	}
	if err := r.remount(0); err != nil {
		return c, fmt.Errorf("remounting the store read-write: %w", err)
	}
	// A new file renamed over the old one, never a write into it: a process
	// still running this text maps the old file's blocks directly (DAX), and
	// keeps them until it exits; the rename gives the next start the new
	// blocks. The mode is Store.Put's.
	werr := off2f.WriteFileAtomic(c.Text, text, 0o444)
	// Read-only again whatever happened: the store must not stay writable.
	// EBUSY here means the old file is still mapped (by another process
	// running the same program): the filesystem stays writable until it
	// is unmapped and the next boot mounts it read-only again.
	rerr := r.remount(msRdonly)
	if werr != nil {
		return c, werr
	}
	c.Repaired = clean
	if rerr != nil {
		return c, fmt.Errorf("remounting the store read-only after the repair (it stays read-write until the next boot): %w", rerr)
	}
	return c, nil
}

// remount changes the store's read-only flag; the filesystem type and the
// mount data stay the mount's own (ext4 refuses a remount that changes dax).
func (r *textRepair) remount(flags uintptr) error {
	s := &r.Store
	return r.Mounter.Mount(s.Device, s.DirOrDefault(), s.FSTypeOrDefault(), msRemount|flags, s.OptionsOrDefault())
}

// errMissing is readText's answer for a file that is not there.
var errMissing = errors.New("missing")

// checkText checks the text file at path against the program's header: its
// whole content hashes to what its header says (off2f.ParseText), and that
// header is the note's (what the loader checks).
func checkText(h *off2f.Header, path string) error {
	_, err := readText(h, path)
	return err
}

// readText reads the text file at path and checks it: see checkText.
func readText(h *off2f.Header, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errMissing
	}
	if err != nil {
		return nil, err
	}
	th, err := off2f.ParseText(b)
	if err != nil {
		return nil, err
	}
	if err := h.CheckText(th); err != nil {
		return nil, err
	}
	return b, nil
}
