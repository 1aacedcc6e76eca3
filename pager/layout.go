package pager

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/internal/dirsync"
)

// Order is how a program walks a matrix.
type Order uint32

const (
	RowMajor    Order = 1 // a[i][0], a[i][1], ...: rows one after another
	ColumnMajor Order = 2 // a[0][j], a[1][j], ...: columns one after another
	Tiled       Order = 3 // TileRows × TileCols blocks, row-major inside and between
)

func (o Order) String() string {
	switch o {
	case RowMajor:
		return "row-major"
	case ColumnMajor:
		return "column-major"
	case Tiled:
		return "tiled"
	}
	return fmt.Sprintf("order(%d)", uint32(o))
}

// Shape is a matrix of Rows × Cols elements of Elem bytes, stored
// row-major in the region (element (i, j) at (i*Cols + j) * Elem), as a Go
// program indexes a flat slice.
type Shape struct {
	Rows, Cols int
	Elem       int
}

// Bytes is the matrix's size.
func (s Shape) Bytes() int64 { return int64(s.Rows) * int64(s.Cols) * int64(s.Elem) }

// Hint is the access pattern the program promises: the layout stores the
// region's pages in the order this walk first touches them, so that a run
// of the walk is one sequential read.
type Hint struct {
	Order              Order
	TileRows, TileCols int // Tiled only
}

func (s Shape) check(h Hint) error {
	if s.Rows < 1 || s.Cols < 1 || s.Elem < 1 || s.Rows > 1<<24 || s.Cols > 1<<24 || s.Elem > 1<<16 {
		return fmt.Errorf("shape %d×%d of %d-byte elements: want rows and cols 1 to 2^24, elem 1 to 65536", s.Rows, s.Cols, s.Elem)
	}
	switch h.Order {
	case RowMajor, ColumnMajor:
		if h.TileRows != 0 || h.TileCols != 0 {
			return fmt.Errorf("hint %v with a tile size: tiles are for Tiled only", h.Order)
		}
	case Tiled:
		if h.TileRows < 1 || h.TileCols < 1 || h.TileRows > s.Rows || h.TileCols > s.Cols {
			return fmt.Errorf("tile %d×%d for a %d×%d matrix: want 1 to the matrix's size", h.TileRows, h.TileCols, s.Rows, s.Cols)
		}
	default:
		return fmt.Errorf("hint order %d: want RowMajor, ColumnMajor or Tiled", h.Order)
	}
	return nil
}

// walk returns the region's page numbers in the order the hinted walk
// first touches them (every page once), and the start of each unit: the
// positions first touched by one row (row-major), one column
// (column-major) or one tile (tiled). The pager protects the unit the
// program is in (evict.go).
func walk(s Shape, h Hint, pageSize int) (order, units []int32) {
	npages := int((s.Bytes() + int64(pageSize) - 1) / int64(pageSize))
	order = make([]int32, 0, npages)
	seen := make([]bool, npages)
	mark := func(off int64) {
		if p := int(off / int64(pageSize)); !seen[p] {
			seen[p] = true
			order = append(order, int32(p))
		}
	}
	// An element's last byte may lie in the next page: touch both ends.
	touch := func(i, j int) {
		off := (int64(i)*int64(s.Cols) + int64(j)) * int64(s.Elem)
		mark(off)
		mark(off + int64(s.Elem) - 1)
	}
	unit := func(f func()) {
		start := len(order)
		f()
		if len(order) > start {
			units = append(units, int32(start))
		}
	}
	switch h.Order {
	case RowMajor:
		for i := range s.Rows {
			unit(func() {
				// A row's pages are consecutive: its two ends cover them.
				first := (int64(i) * int64(s.Cols) * int64(s.Elem)) / int64(pageSize)
				last := ((int64(i)+1)*int64(s.Cols)*int64(s.Elem) - 1) / int64(pageSize)
				for p := first; p <= last; p++ {
					mark(p * int64(pageSize))
				}
			})
		}
	case ColumnMajor:
		for j := range s.Cols {
			unit(func() {
				for i := range s.Rows {
					touch(i, j)
				}
			})
		}
	case Tiled:
		for ti := 0; ti < s.Rows; ti += h.TileRows {
			for tj := 0; tj < s.Cols; tj += h.TileCols {
				unit(func() {
					for i := ti; i < min(ti+h.TileRows, s.Rows); i++ {
						for j := tj; j < min(tj+h.TileCols, s.Cols); j++ {
							touch(i, j)
						}
					}
				})
			}
		}
	}
	return order, units
}

// The layout file: one header page, then the region's pages in walk order.
// The header (little-endian):
//
//	offset size field
//	0      8    magic "NVPAGER1"
//	8      4    version (1)
//	12     4    page size the layout was written for
//	16     8    rows
//	24     8    cols
//	32     4    element size
//	36     4    hint order (1 row-major, 2 column-major, 3 tiled)
//	40     4    tile rows (0 unless tiled)
//	44     4    tile cols (0 unless tiled)
//	48     8    data pages
//	56     4    CRC-32C of bytes 0..55
//	60     4    reserved, zero
//
// The rest of the header page is zero. Data page k (at (k+1) × page size)
// holds region page walk[k]; the last region page is padded with zeros.
const (
	layoutMagic   = "NVPAGER1"
	layoutVersion = 1
	headerSize    = 64
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrLayout: the file is not a layout this package can use.
var ErrLayout = errors.New("not a usable pager layout")

type header struct {
	pageSize int
	shape    Shape
	hint     Hint
	pages    int64
}

func (h header) encode() []byte {
	b := make([]byte, headerSize)
	copy(b, layoutMagic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], layoutVersion)
	le.PutUint32(b[12:], uint32(h.pageSize))
	le.PutUint64(b[16:], uint64(h.shape.Rows))
	le.PutUint64(b[24:], uint64(h.shape.Cols))
	le.PutUint32(b[32:], uint32(h.shape.Elem))
	le.PutUint32(b[36:], uint32(h.hint.Order))
	le.PutUint32(b[40:], uint32(h.hint.TileRows))
	le.PutUint32(b[44:], uint32(h.hint.TileCols))
	le.PutUint64(b[48:], uint64(h.pages))
	le.PutUint32(b[56:], crc32.Checksum(b[:56], castagnoli))
	return b
}

func decodeHeader(b []byte, pageSize int) (header, error) {
	var h header
	if len(b) < headerSize || string(b[:8]) != layoutMagic {
		return h, fmt.Errorf("%w: no %q magic", ErrLayout, layoutMagic)
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[8:]); v != layoutVersion {
		return h, fmt.Errorf("%w: version %d, this code reads %d", ErrLayout, v, layoutVersion)
	}
	if sum := crc32.Checksum(b[:56], castagnoli); le.Uint32(b[56:]) != sum || le.Uint32(b[60:]) != 0 {
		return h, fmt.Errorf("%w: header checksum or reserved field wrong", ErrLayout)
	}
	h.pageSize = int(le.Uint32(b[12:]))
	if h.pageSize != pageSize {
		return h, fmt.Errorf("%w: written for %d-byte pages, this machine has %d", ErrLayout, h.pageSize, pageSize)
	}
	rows, cols := le.Uint64(b[16:]), le.Uint64(b[24:])
	if rows > 1<<24 || cols > 1<<24 {
		return h, fmt.Errorf("%w: shape %d×%d too large", ErrLayout, rows, cols)
	}
	h.shape = Shape{Rows: int(rows), Cols: int(cols), Elem: int(le.Uint32(b[32:]))}
	h.hint = Hint{Order: Order(le.Uint32(b[36:])), TileRows: int(le.Uint32(b[40:])), TileCols: int(le.Uint32(b[44:]))}
	if err := h.shape.check(h.hint); err != nil {
		return h, fmt.Errorf("%w: %v", ErrLayout, err)
	}
	h.pages = int64(le.Uint64(b[48:]))
	if want := (h.shape.Bytes() + int64(pageSize) - 1) / int64(pageSize); h.pages != want {
		return h, fmt.Errorf("%w: %d data pages for a %d-byte matrix, want %d", ErrLayout, h.pages, h.shape.Bytes(), want)
	}
	return h, nil
}

// CreateLayout writes the layout of a matrix to path: the matrix read from
// src in its natural row-major order (nil: zeros), its pages stored in the
// order hint's walk touches them. It is written once and reused by every
// Map; it is made beside path and renamed, so a cut-short write never
// leaves a partial layout at path.
func CreateLayout(path string, s Shape, hint Hint, src io.ReaderAt) error {
	if err := createLayout(path, s, hint, src); err != nil {
		return fmt.Errorf("pager: create layout %s: %w", path, err)
	}
	return nil
}

func createLayout(path string, s Shape, hint Hint, src io.ReaderAt) (err error) {
	if err := s.check(hint); err != nil {
		return err
	}
	ps := pageSize
	order, _ := walk(s, hint, ps)
	h := header{pageSize: ps, shape: s, hint: hint, pages: int64(len(order))}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".creating")
	// O_DIRECT where the filesystem allows it, as the pager reads: writing
	// a layout larger than the memory it may use then fills no page cache.
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC|unix.O_DIRECT, 0o600)
	if errors.Is(err, unix.EINVAL) {
		f, err = os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	}
	if err != nil {
		return err
	}
	const chunk = 64 // pages per write
	buf := alignedBuf(chunk * ps)
	defer func() {
		unix.Munmap(buf)
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	copy(buf, h.encode())
	if _, err := f.WriteAt(buf[:ps], 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(ps) * (1 + h.pages)); err != nil {
		return err
	}
	if src != nil {
		// Each write is a whole chunk of the layout (consecutive there
		// whatever the walk), gathered with one read per stretch that is
		// also consecutive in the source (a row-major walk is one): a
		// column-major B at N = 1024 was 2 048 writes of a page, 4 s of
		// the SD card's 500 writes a second. Writes are whole pages
		// (O_DIRECT), the matrix's last one padded with zeros.
		for k := 0; k < len(order); {
			n := min(chunk, len(order)-k)
			b := buf[:n*ps]
			for i := 0; i < n; {
				c := 1
				for i+c < n && order[k+i+c] == order[k+i]+int32(c) {
					c++
				}
				off := int64(order[k+i]) * int64(ps)
				want := min(int64(c*ps), s.Bytes()-off)
				d := b[i*ps : (i+c)*ps]
				clear(d[want:])
				if m, err := src.ReadAt(d[:want], off); int64(m) < want {
					return fmt.Errorf("reading the matrix at %d: %d of %d bytes: %w", off, m, want, err)
				}
				i += c
			}
			if _, err := f.WriteAt(b, int64(ps)*int64(1+k)); err != nil {
				return err
			}
			k += n
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return dirsync.Sync(filepath.Dir(path))
}
