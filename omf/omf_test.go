package omf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/nvboot/nvboot/pmem"
)

// writeRef writes size bytes of a fixed pseudo-random pattern to a new
// file and returns its path and the bytes: the in-memory reference.
func writeRef(t testing.TB, size int, seed uint64) (string, []byte) {
	t.Helper()
	ref := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range ref {
		ref[i] = byte(r.Uint32())
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, ref, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, ref
}

func open(t testing.TB, path string, o Options) *File {
	t.Helper()
	f, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestReadAtMatchesFile(t *testing.T) {
	bs := BlockSize()
	// Sizes around block and chunk edges; small chunks so reads cross them.
	for _, size := range []int{1, bs - 1, bs, bs + 1, 3*bs + 17, 5 * 4 * bs} {
		path, ref := writeRef(t, size, uint64(size))
		f := open(t, path, Options{ChunkSize: 4 * bs})
		for _, c := range []struct{ off, n int }{
			{0, size}, {0, 1}, {size - 1, 1}, {bs - 3, 7}, {size / 2, size - size/2}, {1, size - 1},
		} {
			if c.off < 0 || c.n <= 0 || c.off+c.n > size {
				continue
			}
			p := make([]byte, c.n)
			n, err := f.ReadAt(p, int64(c.off))
			if err != nil || n != c.n {
				t.Fatalf("size %d: ReadAt(%d, %d) = %d, %v", size, c.off, c.n, n, err)
			}
			if !bytes.Equal(p, ref[c.off:c.off+c.n]) {
				t.Fatalf("size %d: ReadAt(%d, %d) differs from the file", size, c.off, c.n)
			}
		}
		// Past the end: the bytes that are there, then io.EOF.
		p := make([]byte, 10)
		if size < 3 {
			continue
		}
		n, err := f.ReadAt(p, int64(size-3))
		if n != 3 || !errors.Is(err, io.EOF) || !bytes.Equal(p[:3], ref[size-3:]) {
			t.Fatalf("size %d: ReadAt across the end = %d, %v", size, n, err)
		}
		if n, err := f.ReadAt(p, int64(size)); n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("size %d: ReadAt at the end = %d, %v", size, n, err)
		}
	}
}

func TestReadBlockAliasesFile(t *testing.T) {
	bs := BlockSize()
	size := 10*bs + 100
	path, ref := writeRef(t, size, 7)
	f := open(t, path, Options{ChunkSize: 4 * bs})
	for _, c := range []struct{ blk, n int64 }{{0, 1}, {0, 4}, {3, 2}, {2, 8}, {10, 1}, {8, 3}} {
		w, err := f.ReadBlock(c.blk, c.n)
		if err != nil {
			t.Fatalf("ReadBlock(%d, %d): %v", c.blk, c.n, err)
		}
		lo := int(c.blk) * bs
		hi := min(lo+int(c.n)*bs, size)
		if !bytes.Equal(w.Bytes(), ref[lo:hi]) || w.Offset() != int64(lo) {
			t.Fatalf("ReadBlock(%d, %d): %d bytes at %d differ from the file", c.blk, c.n, len(w.Bytes()), w.Offset())
		}
		if err := w.Release(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ blk, n int64 }{{-1, 1}, {0, 0}, {0, -1}, {11, 1}, {10, 2}, {1 << 60, 1}} {
		if _, err := f.ReadBlock(c.blk, c.n); !errors.Is(err, ErrRange) {
			t.Errorf("ReadBlock(%d, %d) = %v, want ErrRange", c.blk, c.n, err)
		}
	}
}

// TestWindowLifetime: a held window keeps its mapping; Close refuses while
// one is held; a second Release is an error, not a second munmap.
func TestWindowLifetime(t *testing.T) {
	bs := BlockSize()
	path, ref := writeRef(t, 8*bs, 3)
	f, err := Open(path, Options{ChunkSize: 4 * bs})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := f.ReadBlock(0, 2) // inside chunk 0
	if err != nil {
		t.Fatal(err)
	}
	span, err := f.ReadBlock(3, 2) // across chunks 0 and 1: its own mapping
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close with windows held = %v, want ErrBusy", err)
	}
	if !bytes.Equal(shared.Bytes(), ref[:2*bs]) || !bytes.Equal(span.Bytes(), ref[3*bs:5*bs]) {
		t.Fatal("a window changed after a refused Close")
	}
	if err := shared.Release(); err != nil {
		t.Fatal(err)
	}
	if err := shared.Release(); !errors.Is(err, ErrReleased) {
		t.Fatalf("second Release = %v, want ErrReleased", err)
	}
	if err := shared.Read(func([]byte) {}); !errors.Is(err, ErrReleased) {
		t.Fatalf("Read after Release = %v, want ErrReleased", err)
	}
	if err := f.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close with one window held = %v, want ErrBusy", err)
	}
	if err := span.Release(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadBlock(0, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReadBlock after Close = %v, want ErrClosed", err)
	}
	if err := f.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
}

// TestTruncatedUnderWindow: reading pages the file no longer has is an
// error, never a SIGBUS that kills the test binary.
func TestTruncatedUnderWindow(t *testing.T) {
	bs := BlockSize()
	path, _ := writeRef(t, 8*bs, 5)
	f := open(t, path, Options{ChunkSize: 8 * bs})
	w, err := f.ReadBlock(0, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	p := make([]byte, bs)
	if _, err := f.ReadAt(p, int64(6*bs)); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(bs)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(p, int64(6*bs)); !errors.Is(err, ErrTruncated) {
		t.Fatalf("ReadAt past the new end = %v, want ErrTruncated", err)
	}
	var sum byte
	err = w.Read(func(b []byte) {
		for _, c := range b {
			sum += c
		}
	})
	var fault *Fault
	if !errors.Is(err, ErrTruncated) || !errors.As(err, &fault) || !w.owns(fault.Addr) {
		t.Fatalf("Window.Read after truncation = %v, want ErrTruncated at an address in the window", err)
	}
	if err := Guard(func() { sink = w.Bytes()[7*bs] }); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Guard = %v, want ErrTruncated", err)
	}
	// What is still in the file reads as before.
	if _, err := f.ReadAt(p[:10], 0); err != nil {
		t.Fatal(err)
	}
	// A fault outside our mappings is not ours to hide.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Guard swallowed a plain panic")
			}
		}()
		Guard(func() { panic("not a fault") })
	}()
}

// TestWritesSurviveSyncAndReopen: bytes stored through a writable window
// are seen by ReadAt at once and are in the file after SyncBlock, Close and
// a reopen, against an in-memory reference.
func TestWritesSurviveSyncAndReopen(t *testing.T) {
	bs := BlockSize()
	path, ref := writeRef(t, 6*bs+50, 11)
	f, err := Open(path, Options{Writable: true, ChunkSize: 2 * bs})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("mode %s", f.Mode())
	p := make([]byte, len(ref))
	if _, err := f.ReadAt(p, 0); err != nil { // map every chunk first
		t.Fatal(err)
	}
	w, err := f.WriteBlock(1, 6) // through the partial last block
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Bytes()) != 5*bs+50 {
		t.Fatalf("writable window of %d bytes, want %d", len(w.Bytes()), 5*bs+50)
	}
	for i, off := range []int{0, 1, bs - 1, 3*bs + 5, 5*bs + 49} {
		w.Bytes()[off] = byte(0xA0 + i)
		ref[bs+off] = byte(0xA0 + i)
	}
	if err := f.SyncBlock(w, 0, len(w.Bytes())); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(p, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p, ref) {
		t.Fatal("ReadAt does not see the window's stores")
	}
	for _, c := range [][2]int{{-1, 1}, {0, 6 * bs}, {5 * bs, 51}} {
		if err := w.Sync(c[0], c[1]); !errors.Is(err, ErrRange) {
			t.Errorf("Sync(%d, %d) = %v, want ErrRange", c[0], c[1], err)
		}
	}
	if err := w.Release(); err != nil {
		t.Fatal(err)
	}
	// A read-only window of a writable File, across chunks (a mapping of
	// its own), is still not for syncing.
	span, err := f.ReadBlock(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SyncBlock(span, 0, 1); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("SyncBlock of a ReadBlock window = %v, want ErrReadOnly", err)
	}
	span.Release()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, ref) {
		t.Fatal("the file after SyncBlock and Close differs from the reference")
	}
	f = open(t, path, Options{})
	if _, err := f.ReadAt(p, 0); err != nil || !bytes.Equal(p, ref) {
		t.Fatalf("reopened: %v, or bytes differ", err)
	}
}

var sink byte

func TestReadOnlyRefusesWrites(t *testing.T) {
	path, _ := writeRef(t, 3*BlockSize(), 2)
	f := open(t, path, Options{})
	if _, err := f.WriteBlock(0, 1); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("WriteBlock on a read-only File = %v, want ErrReadOnly", err)
	}
	w, err := f.ReadBlock(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	if err := f.SyncBlock(w, 0, 1); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("SyncBlock of a ReadBlock window = %v, want ErrReadOnly", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, path string
		o          Options
	}{
		{"missing", filepath.Join(dir, "none"), Options{}},
		{"directory", dir, Options{}},
		{"odd chunk", dir, Options{ChunkSize: 1000}},
	} {
		if f, err := Open(c.path, c.o); err == nil {
			f.Close()
			t.Errorf("%s: Open succeeded", c.name)
		}
	}
}

// TestGrowingFile: a read past the size seen at Open asks the kernel again
// and finds the new bytes, in a chunk that was already mapped.
func TestGrowingFile(t *testing.T) {
	bs := BlockSize()
	path, ref := writeRef(t, bs, 9)
	f := open(t, path, Options{ChunkSize: 4 * bs})
	p := make([]byte, bs)
	if _, err := f.ReadAt(p, 0); err != nil {
		t.Fatal(err)
	}
	more := bytes.Repeat([]byte{0x5A}, bs)
	h, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.Write(more)
	h.Close()
	if _, err := f.ReadAt(p, int64(bs)); err != nil || !bytes.Equal(p, more) {
		t.Fatalf("ReadAt of appended bytes: %v", err)
	}
	if f.Size() != int64(2*bs) {
		t.Fatalf("Size = %d after a read past the old end, want %d", f.Size(), 2*bs)
	}
	_ = ref
}

// TestConcurrentReaders: ReadAt and ReadBlock from several goroutines
// while chunks are mapped on first touch and unmapped by Unmap under them
// (run with -race). The readers go on until Unmap has given back mappings
// many times while they read.
func TestConcurrentReaders(t *testing.T) {
	bs := BlockSize()
	path, ref := writeRef(t, 32*bs, 13)
	f := open(t, path, Options{ChunkSize: 2 * bs})
	var unmaps atomic.Int64 // Unmaps that gave back a mapping
	stop := make(chan struct{})
	unmapped := make(chan error)
	go func() {
		for {
			select {
			case <-stop:
				unmapped <- nil
				return
			default:
			}
			n, err := f.Unmap()
			if err != nil {
				unmapped <- err
				return
			}
			if n > 0 {
				unmaps.Add(1)
			}
			runtime.Gosched()
		}
	}()
	const want = 200
	done := make(chan error)
	for g := range 4 {
		go func() {
			p := make([]byte, bs+7)
			for i := 0; i < 200 || unmaps.Load() < want && i < 2_000_000; i++ {
				off := (i*7919 + g*104729) % (len(ref) - len(p))
				if _, err := f.ReadAt(p, int64(off)); err != nil || !bytes.Equal(p, ref[off:off+len(p)]) {
					done <- fmt.Errorf("ReadAt at %d differs (%v)", off, err)
					return
				}
				w, err := f.ReadBlock(int64(i%31), 1)
				if err != nil {
					done <- err
					return
				}
				if !bytes.Equal(w.Bytes(), ref[i%31*bs:(i%31+1)*bs]) {
					done <- fmt.Errorf("ReadBlock(%d, 1) differs", i%31)
					return
				}
				w.Release()
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-unmapped; err != nil {
		t.Fatal(err)
	}
	if n := unmaps.Load(); n < want {
		t.Fatalf("Unmap gave back mappings %d times while the readers read, want %d", n, want)
	}
}

// mappings counts the process's mappings of path (/proc/self/maps).
func mappings(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte(" "+path+"\n"))
}

// TestUnmap: Unmap gives back the chunks no one holds (the kernel's map
// shows them gone), keeps a held window's, and the next read maps again
// and reads the file's bytes.
func TestUnmap(t *testing.T) {
	bs := BlockSize()
	path, ref := writeRef(t, 8*bs, 17)
	f := open(t, path, Options{ChunkSize: 4 * bs})
	p := make([]byte, 8*bs)
	if _, err := f.ReadAt(p, 0); err != nil { // maps chunks 0 and 1
		t.Fatal(err)
	}
	w, err := f.ReadBlock(1, 2) // holds chunk 0
	if err != nil {
		t.Fatal(err)
	}
	if got := mappings(t, path); got != 2 {
		t.Fatalf("%d mappings of the file before Unmap, want 2", got)
	}
	n, err := f.Unmap()
	if err != nil || n != int64(4*bs) {
		t.Fatalf("Unmap with chunk 0 held = %d, %v; want %d (chunk 1)", n, err, 4*bs)
	}
	if got := mappings(t, path); got != 1 {
		t.Fatalf("%d mappings of the file after Unmap, want 1 (the held chunk)", got)
	}
	if !bytes.Equal(w.Bytes(), ref[bs:3*bs]) {
		t.Fatal("the held window changed after Unmap")
	}
	clear(p)
	if _, err := f.ReadAt(p, 0); err != nil || !bytes.Equal(p, ref) {
		t.Fatalf("ReadAt after Unmap: %v, equal %v", err, bytes.Equal(p, ref))
	}
	if err := w.Release(); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Unmap(); err != nil || n != int64(8*bs) {
		t.Fatalf("Unmap with nothing held = %d, %v; want %d", n, err, 8*bs)
	}
	if got := mappings(t, path); got != 0 {
		t.Fatalf("%d mappings of the file after the second Unmap, want 0", got)
	}
	w, err = f.ReadBlock(5, 2)
	if err != nil || !bytes.Equal(w.Bytes(), ref[5*bs:7*bs]) {
		t.Fatalf("ReadBlock after Unmap: %v", err)
	}
	w.Release()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Unmap(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Unmap after Close = %v, want ErrClosed", err)
	}
}

// TestDAXDetection: the answer Open takes from statx agrees with the
// MAP_SYNC probe for kernels without the attribute. This host's files are
// not DAX; testdata/daxomf holds the two to the same answer on DAX.
func TestDAXDetection(t *testing.T) {
	path, _ := writeRef(t, 4096, 19)
	h, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	f := open(t, path, Options{})
	if probe := probeDAX(h); f.DAX() != probe {
		t.Fatalf("Open says DAX %v, the MAP_SYNC probe %v", f.DAX(), probe)
	}
	if size, dax, err := statFile(h); err != nil || size != 4096 || dax != f.DAX() {
		t.Fatalf("statFile = %d, %v, %v", size, dax, err)
	}
}

// TestDAXPathsOnPageCache takes the DAX paths on a page-cache file (this
// host has no DAX): the window that maps a chunk is populated alone, at
// chunk 0 and beyond, across chunks and at a partial last block, between
// Unmaps; WriteBlock's MAP_SYNC is refused (EOPNOTSUPP) and it falls back
// to a plain mapping and msync, once.
func TestDAXPathsOnPageCache(t *testing.T) {
	bs := BlockSize()
	path, ref := writeRef(t, 13*bs+100, 23)
	f := open(t, path, Options{Writable: true, ChunkSize: 4 * bs})
	f.dax = true
	for _, r := range [][2]int64{{0, 2}, {5, 2}, {3, 3}, {12, 2}, {9, 1}, {12, 1}} {
		w, err := f.ReadBlock(r[0], r[1])
		if err != nil {
			t.Fatalf("ReadBlock(%d, %d): %v", r[0], r[1], err)
		}
		lo := int(r[0]) * bs
		if !bytes.Equal(w.Bytes(), ref[lo:min(lo+int(r[1])*bs, len(ref))]) {
			t.Fatalf("ReadBlock(%d, %d) differs from the file", r[0], r[1])
		}
		w.Release()
		if _, err := f.Unmap(); err != nil {
			t.Fatal(err)
		}
	}
	if !pmem.Available() {
		t.Skip("no cache flush instruction: WriteBlock maps plainly on DAX too")
	}
	for i := range 2 {
		w, err := f.WriteBlock(int64(i), 1)
		if err != nil {
			t.Fatalf("WriteBlock on a file that refuses MAP_SYNC: %v", err)
		}
		if w.dax || !f.noSync.Load() {
			t.Fatalf("window %d: MAP_SYNC %v, refusal remembered %v", i, w.dax, f.noSync.Load())
		}
		w.Bytes()[7] = ^ref[i*bs+7]
		if err := w.Sync(7, 1); err != nil {
			t.Fatal(err)
		}
		w.Release()
	}
	got, err := os.ReadFile(path)
	if err != nil || got[7] != ^ref[7] || got[bs+7] != ^ref[bs+7] {
		t.Fatalf("the synced stores are not in the file (%v)", err)
	}
}
