package pager

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// ref returns a matrix's natural (row-major) bytes: element (i, j) holds
// i*cols+j in its first 4 bytes, so a misplaced page shows.
func ref(s Shape) []byte {
	b := make([]byte, s.Bytes())
	for i := range s.Rows {
		for j := range s.Cols {
			off := (i*s.Cols + j) * s.Elem
			var e [8]byte
			binary.LittleEndian.PutUint32(e[:], uint32(i*s.Cols+j))
			copy(b[off:off+s.Elem], e[:])
		}
	}
	return b
}

// equal compares region memory (a) with b in plain Go, never in assembly
// (bytes.Equal): a fault at an instruction the runtime cannot preempt
// could wait for a handler that a stop-the-world holds (see Limits in
// the package documentation).
// mapped lays the reference matrix of shape s out with hint h in a
// temporary file, starts a pager with c and maps the layout: the pager (to
// Close), the region, and the bytes the region must hold.
func mapped(t testing.TB, c Config, s Shape, h Hint) (*Pager, *Region, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m")
	want := ref(s)
	if err := CreateLayout(path, s, h, bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Map(path)
	if err != nil {
		p.Close()
		t.Fatal(err)
	}
	return p, r, want
}

func equal(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// modes runs a test with userfaultfd (skipped where it is not available)
// and in the mmap fallback.
func modes(t *testing.T, f func(t *testing.T, c Config)) {
	t.Run("userfaultfd", func(t *testing.T) {
		p, err := New(Config{Budget: 8 * int64(pageSize)})
		if err != nil {
			t.Fatal(err)
		}
		reason := p.Reason()
		p.Close()
		if reason != "" {
			t.Skipf("no userfaultfd here: %s", reason)
		}
		f(t, Config{Budget: 8 * int64(pageSize), RunPages: 2})
	})
	t.Run("mmap", func(t *testing.T) { f(t, Config{Budget: 8 * int64(pageSize), NoUffd: true}) })
}

var shapes = []struct {
	s Shape
	h Hint
}{
	{Shape{64, 64, 8}, Hint{Order: RowMajor}},
	{Shape{64, 64, 8}, Hint{Order: ColumnMajor}},
	{Shape{40, 96, 8}, Hint{Order: Tiled, TileRows: 16, TileCols: 16}},
	{Shape{33, 77, 8}, Hint{Order: ColumnMajor}},                     // rows across page edges, a partial last page
	{Shape{50, 50, 6}, Hint{Order: Tiled, TileRows: 7, TileCols: 9}}, // elements across page edges
	{Shape{3, 5, 4}, Hint{Order: RowMajor}},                          // less than a page
}

// TestReadsMatchReference: every byte of the region equals the matrix's,
// read in the hinted walk and in others, with a budget far below the data.
func TestReadsMatchReference(t *testing.T) {
	modes(t, func(t *testing.T, c Config) {
		for _, sh := range shapes {
			p, r, want := mapped(t, c, sh.s, sh.h)
			b := r.Bytes()
			for pass := range 2 {
				// Column by column, then row by row.
				for j := range sh.s.Cols {
					for i := range sh.s.Rows {
						off := (i*sh.s.Cols + j) * sh.s.Elem
						if !equal(b[off:off+sh.s.Elem], want[off:off+sh.s.Elem]) {
							t.Fatalf("%v %v pass %d: element (%d, %d) differs", sh.s, sh.h, pass, i, j)
						}
					}
				}
				if !equal(b, want) {
					t.Fatalf("%v %v: the region differs from the matrix", sh.s, sh.h)
				}
			}
			st := p.Stats()
			if p.Mode() == "userfaultfd" && st.MaxResident > 8 {
				t.Errorf("%v: %d pages resident, budget 8", sh.s, st.MaxResident)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestWritesSurviveSyncAndReopen: stores to the region, some evicted
// before Sync and some not, are in the layout after Sync and a new Map,
// which reads the shape and hint the layout was made with.
func TestWritesSurviveSyncAndReopen(t *testing.T) {
	modes(t, func(t *testing.T, c Config) {
		for _, sh := range shapes {
			p, r, want := mapped(t, c, sh.s, sh.h)
			b := r.Bytes()
			// Write every 5th byte walking backwards (evicting early
			// writes), then read everything, which evicts the rest.
			for off := len(b) - 1; off >= 0; off -= 5 {
				b[off] ^= 0xFF
				want[off] ^= 0xFF
			}
			if !equal(b, want) {
				t.Fatalf("%v %v: the region differs after writes", sh.s, sh.h)
			}
			b[0] = 0x42 // a write after the last eviction, kept by Sync
			want[0] = 0x42
			if err := p.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			path := r.path
			p, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			if r, err = p.Map(path); err != nil {
				t.Fatal(err)
			}
			if !equal(r.Bytes(), want) {
				t.Fatalf("%v %v: the reopened region differs", sh.s, sh.h)
			}
			if r.Shape() != sh.s || r.Hint() != sh.h {
				t.Errorf("reopened %v %v: Shape %v, Hint %v", sh.s, sh.h, r.Shape(), r.Hint())
			}
			st := p.Stats()
			p.Close()
			if p.Mode() == "userfaultfd" && st.PagesIn == 0 {
				t.Fatal("the pager read no pages")
			}
		}
	})
}

// TestRunsAreSequentialReads: a column walk of a row-major matrix with a
// column-major layout reads whole runs; the same walk with a row-major
// layout needs a read for every page it faults.
func TestRunsAreSequentialReads(t *testing.T) {
	p0, _ := New(Config{Budget: 1 << 20})
	if p0.Reason() != "" {
		t.Skipf("no userfaultfd here: %s", p0.Reason())
	}
	p0.Close()
	s := Shape{256, 1024, 8} // 2 pages a row
	reads := map[Order]int64{}
	for _, o := range []Order{RowMajor, ColumnMajor} {
		path := filepath.Join(t.TempDir(), "m")
		if err := CreateLayout(path, s, Hint{Order: o}, nil); err != nil {
			t.Fatal(err)
		}
		p, err := New(Config{Budget: 64 * int64(pageSize), RunPages: 16})
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.Map(path)
		if err != nil {
			t.Fatal(err)
		}
		m := r.Float64s()
		var sum float64
		for j := 0; j < s.Cols; j += 256 {
			for i := range s.Rows {
				sum += m[i*s.Cols+j]
			}
		}
		reads[o] = p.Stats().Reads
		p.Close()
		if sum != 0 || math.IsNaN(sum) {
			t.Fatal("zeros expected")
		}
	}
	// 4 columns × 256 pages, in runs of 16 pages: at most 64 reads (fewer
	// when a repeated walk keeps pages). A row-major run holds both page
	// columns of 8 rows, half of it not wanted.
	if reads[ColumnMajor] > 64 || reads[RowMajor] < 2*reads[ColumnMajor] {
		t.Fatalf("reads: column-major layout %d (want 64), row-major layout %d (want far more)", reads[ColumnMajor], reads[RowMajor])
	}
}

func TestLayoutErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		s Shape
		h Hint
	}{
		{Shape{0, 1, 8}, Hint{Order: RowMajor}},
		{Shape{1, 1, 0}, Hint{Order: RowMajor}},
		{Shape{4, 4, 8}, Hint{Order: 9}},
		{Shape{4, 4, 8}, Hint{Order: Tiled}},
		{Shape{4, 4, 8}, Hint{Order: Tiled, TileRows: 5, TileCols: 1}},
		{Shape{4, 4, 8}, Hint{Order: RowMajor, TileRows: 2, TileCols: 2}},
	} {
		if err := CreateLayout(filepath.Join(dir, "x"), c.s, c.h, nil); err == nil {
			t.Errorf("CreateLayout(%v, %v) succeeded", c.s, c.h)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("a refused layout left a file")
	}
	if err := CreateLayout(filepath.Join(dir, "short"), Shape{64, 64, 8}, Hint{Order: RowMajor}, bytes.NewReader(make([]byte, 100))); err == nil {
		t.Error("a short source was accepted")
	}
	if _, err := New(Config{Budget: 4096}); err == nil {
		t.Error("a one-page budget was accepted")
	}
	p, err := New(Config{Budget: 1 << 20, NoUffd: true})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "junk"), make([]byte, 8192), 0o600)
	if _, err := p.Map(filepath.Join(dir, "junk")); err == nil {
		t.Error("Map of a file of zeros succeeded")
	}
	if err := CreateLayout(filepath.Join(dir, "ok"), Shape{4, 4, 8}, Hint{Order: RowMajor}, nil); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := p.Map(filepath.Join(dir, "ok")); err == nil {
		t.Error("Map after Close succeeded")
	}
	if err := p.Close(); err == nil {
		t.Error("a second Close succeeded")
	}
}

// TestLayoutFrozen pins the header's bytes.
func TestLayoutFrozen(t *testing.T) {
	h := header{pageSize: 4096, shape: Shape{3, 5, 8}, hint: Hint{Order: Tiled, TileRows: 2, TileCols: 3}, pages: 1}
	b := h.encode()
	le := binary.LittleEndian
	for _, c := range []struct {
		off  int
		want uint64
		size int
	}{{8, 1, 4}, {12, 4096, 4}, {16, 3, 8}, {24, 5, 8}, {32, 8, 4}, {36, 3, 4}, {40, 2, 4}, {44, 3, 4}, {48, 1, 8}, {60, 0, 4}} {
		var got uint64
		if c.size == 4 {
			got = uint64(le.Uint32(b[c.off:]))
		} else {
			got = le.Uint64(b[c.off:])
		}
		if got != c.want {
			t.Errorf("offset %d = %d, want %d", c.off, got, c.want)
		}
	}
	if string(b[:8]) != "NVPAGER1" || len(b) != 64 {
		t.Fatal("magic or size changed")
	}
	if _, err := decodeHeader(b, 4096); err != nil {
		t.Fatal(err)
	}
	b[20] ^= 1
	if _, err := decodeHeader(b, 4096); err == nil {
		t.Fatal("a changed header passed its checksum")
	}
}

func TestIoctlNumbers(t *testing.T) {
	iowr := func(nr, size uintptr) uintptr { return 3<<30 | size<<16 | 0xAA<<8 | nr }
	ior := func(nr, size uintptr) uintptr { return 2<<30 | size<<16 | 0xAA<<8 | nr }
	for _, c := range []struct{ got, want uintptr }{
		{uffdioAPI, iowr(0x3F, 24)},
		{uffdioRegister, iowr(0x00, 32)},
		{uffdioWake, ior(0x02, 16)},
		{uffdioCopy, iowr(0x03, 40)},
		{uffdioWriteProtect, iowr(0x06, 24)},
	} {
		if c.got != c.want {
			t.Errorf("ioctl %#x, want %#x", c.got, c.want)
		}
	}
}

// TestReadWriteAt: the Go-loop copies in and out of a region, with a
// budget far below it, against the reference.
func TestReadWriteAt(t *testing.T) {
	modes(t, func(t *testing.T, c Config) {
		s := Shape{64, 100, 8}
		p, r, want := mapped(t, c, s, Hint{Order: ColumnMajor})
		defer p.Close()
		got := make([]byte, len(want))
		if n, err := r.ReadAt(got, 0); n != len(want) || err != nil || !bytes.Equal(got, want) {
			t.Fatalf("ReadAt = %d, %v, or bytes differ", n, err)
		}
		patch := bytes.Repeat([]byte{0xEE}, 3*pageSize)
		if _, err := r.WriteAt(patch, 1000); err != nil {
			t.Fatal(err)
		}
		copy(want[1000:], patch)
		if n, err := r.ReadAt(got[:10], int64(len(want)-4)); n != 4 || err == nil {
			t.Fatalf("ReadAt across the end = %d, %v", n, err)
		}
		if _, err := r.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("after WriteAt: %v, or bytes differ", err)
		}
		if _, err := r.WriteAt(patch, int64(len(want))); err == nil {
			t.Fatal("WriteAt past the end succeeded")
		}
	})
}

// TestFaultsDoNotAllocate: serving faults, evictions of dirty pages
// included, allocates nothing. Under a Go memory limit the program is past
// (bench/pager's 2 MiB) each allocation that needs a span starts a GC
// cycle, a stop-the-world that must preempt the faulting program.
func TestFaultsDoNotAllocate(t *testing.T) {
	s := Shape{Rows: 256, Cols: 256, Elem: 8} // 128 pages
	p, r, _ := mapped(t, Config{Budget: 16 * int64(pageSize), RunPages: 4}, s, Hint{Order: RowMajor})
	defer p.Close()
	if p.Mode() != "userfaultfd" {
		t.Skipf("no userfaultfd here: %s", p.Reason())
	}
	b := r.Bytes()
	touch := func() {
		for off := 0; off < len(b); off += pageSize {
			b[off]++ // a missing fault, a write-protect fault; evicted dirty later
		}
	}
	touch() // the pager's reused slices reach their size
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 4 {
		touch()
	}
	runtime.ReadMemStats(&after)
	st := p.Stats()
	if n := after.Mallocs - before.Mallocs; n > 16 {
		t.Errorf("%d allocations over 4 passes (%d pages written back, %d faults): the fault path allocates", n, st.PagesOut, st.Faults)
	}
	if st.PagesOut < 4*128 {
		t.Errorf("%d pages written back: want the evictions of dirty pages this test is about", st.PagesOut)
	}
}
