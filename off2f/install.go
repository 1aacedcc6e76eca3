package off2f

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Install makes the static executable raw an OFF2F program: it converts
// it (Convert), puts the text into each store directory (Store.Put: under
// its hash, written once), then writes the header file at header, last,
// so a header file never names text missing from its stores. The
// directories must exist. When a step fails, the text files this call
// created are removed again: no text stays without a header file that
// needs it. written[i] says whether the text was written into stores[i]
// (false: it was there already).
//
// The image builder, off2f convert and bench/exec all install through it.
func Install(raw []byte, opt Options, header string, stores ...string) (conv *Converted, written []bool, err error) {
	conv, err = Convert(raw, opt)
	if err != nil {
		return nil, nil, err
	}
	var created []string
	defer func() {
		if err != nil {
			for _, p := range created {
				os.Remove(p)
			}
		}
	}()
	for _, dir := range stores {
		path := filepath.Join(dir, conv.TextName())
		_, statErr := os.Lstat(path)
		w, err := Store{Dir: dir}.Put(conv.TextName(), conv.Text)
		if err != nil {
			return nil, nil, err
		}
		if w && errors.Is(statErr, fs.ErrNotExist) {
			created = append(created, path)
		}
		written = append(written, w)
	}
	if err := WriteFileAtomic(header, conv.Header, 0o755); err != nil {
		return nil, nil, &HeaderError{Err: err}
	}
	return conv, written, nil
}

// HeaderError is Install's error when the header file could not be
// written, after the text was stored (and removed again); Err names the
// file.
type HeaderError struct{ Err error }

func (e *HeaderError) Error() string { return e.Err.Error() }
func (e *HeaderError) Unwrap() error { return e.Err }
