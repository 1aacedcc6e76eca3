package kernelpmem

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// HeaderSize is the header's size; the kernel starts there.
const HeaderSize = 4096

// Magic starts a written region.
const Magic = "NVBKRN01"

// ErrBlank is a region with no header at all (all zeros where the magic
// goes): never written, or invalidated before a write.
var ErrBlank = errors.New("kernel region is blank")

// Header is the parsed header of a region.
type Header struct {
	Length int64
	Sum    [32]byte
}

// Encode is the header's 4 KiB.
func (h Header) Encode() []byte {
	b := make([]byte, HeaderSize)
	copy(b, Magic)
	binary.LittleEndian.PutUint64(b[8:], uint64(h.Length))
	copy(b[16:48], h.Sum[:])
	return b
}

// ParseHeader checks a header read from a region of regionSize bytes.
func ParseHeader(b []byte, regionSize int64) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, fmt.Errorf("kernel region header: %d bytes, want %d", len(b), HeaderSize)
	}
	if bytes.Equal(b[:len(Magic)], make([]byte, len(Magic))) {
		return h, ErrBlank
	}
	if string(b[:len(Magic)]) != Magic {
		return h, fmt.Errorf("kernel region header: magic %q, want %q", b[:len(Magic)], Magic)
	}
	if !bytes.Equal(b[48:HeaderSize], make([]byte, HeaderSize-48)) {
		return h, errors.New("kernel region header: reserved bytes not zero")
	}
	n := binary.LittleEndian.Uint64(b[8:])
	if n == 0 || n > uint64(regionSize-HeaderSize) || regionSize < HeaderSize {
		return h, fmt.Errorf("kernel region header: kernel of %d bytes does not fit a region of %d", n, regionSize)
	}
	h.Length = int64(n)
	copy(h.Sum[:], b[16:48])
	return h, nil
}

// For is the header of a region holding kernel.
func For(kernel []byte) Header {
	return Header{Length: int64(len(kernel)), Sum: sha256.Sum256(kernel)}
}

// Read returns the kernel a region of size bytes holds, after checking its
// header and its hash: what the firmware does before it boots it.
func Read(r io.ReaderAt, size int64) ([]byte, error) {
	k, _, err := read(r, size)
	return k, err
}

// CheckFile checks the region in the file at path as Read does and
// returns its header, whose Sum is then the kernel's hash.
func CheckFile(path string) (Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Header{}, err
	}
	_, h, err := read(f, st.Size())
	if err != nil {
		return Header{}, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

func read(r io.ReaderAt, size int64) ([]byte, Header, error) {
	head := make([]byte, HeaderSize)
	if _, err := r.ReadAt(head, 0); err != nil {
		return nil, Header{}, fmt.Errorf("kernel region: reading the header: %w", err)
	}
	h, err := ParseHeader(head, size)
	if err != nil {
		return nil, Header{}, err
	}
	k := make([]byte, h.Length)
	if _, err := r.ReadAt(k, HeaderSize); err != nil {
		return nil, Header{}, fmt.Errorf("kernel region: reading %d bytes of kernel: %w", h.Length, err)
	}
	if sha256.Sum256(k) != h.Sum {
		return nil, Header{}, errors.New("kernel region: the kernel's SHA-256 does not match its header (damaged or cut short)")
	}
	return k, h, nil
}

// Syncer is what Write needs of a region: a pmem device or a file.
type Syncer interface {
	io.WriterAt
	Sync() error
}

// Write puts kernel into a region of size bytes: the header invalidated
// and synced first, the kernel written and synced, the header last. A cut
// at any point leaves either the old kernel or a region the firmware
// refuses (and boots the card's kernel), never a header over a part.
func Write(w Syncer, size int64, kernel []byte) error {
	if int64(len(kernel)) > size-HeaderSize || len(kernel) == 0 {
		return fmt.Errorf("kernel region: a kernel of %d bytes does not fit a region of %d", len(kernel), size)
	}
	steps := []struct {
		what string
		b    []byte
		off  int64
	}{
		{"invalidating the header", make([]byte, HeaderSize), 0},
		{"writing the kernel", kernel, HeaderSize},
		{"writing the header", For(kernel).Encode(), 0},
	}
	for _, s := range steps {
		if _, err := w.WriteAt(s.b, s.off); err != nil {
			return fmt.Errorf("kernel region: %s: %w", s.what, err)
		}
		if err := w.Sync(); err != nil {
			return fmt.Errorf("kernel region: %s: sync: %w", s.what, err)
		}
	}
	return nil
}
