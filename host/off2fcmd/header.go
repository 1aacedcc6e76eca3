package off2fcmd

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/off2f"
)

// header is a parsed header file and the path of its text in the store.
type header struct {
	raw  []byte
	h    *off2f.Header
	text string
}

// readHeader reads and checks the header file at path; the text is looked for
// in storeDir, or where the note says when storeDir is empty.
func readHeader(verb, path, storeDir string) (*header, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", verb, err)
	}
	h, err := off2f.ParseHeader(raw)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", verb, path, err)
	}
	if storeDir == "" {
		storeDir = h.Note.StoreDir
	}
	return &header{raw, h, filepath.Join(storeDir, off2f.HashName(h.Note.Hash))}, nil
}
