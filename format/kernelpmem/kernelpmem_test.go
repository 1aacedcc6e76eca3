package kernelpmem

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const regionSize = 1 << 20

func region(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "boot.pmem"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(regionSize); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func kernel(n int, seed byte) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = byte(i*7) ^ seed
	}
	return k
}

func TestWriteRead(t *testing.T) {
	f := region(t)
	if _, err := Read(f, regionSize); !errors.Is(err, ErrBlank) {
		t.Fatalf("blank region: %v, want ErrBlank", err)
	}
	for _, k := range [][]byte{kernel(12345, 1), kernel(regionSize-HeaderSize, 2), kernel(1, 3)} {
		if err := Write(f, regionSize, k); err != nil {
			t.Fatal(err)
		}
		got, err := Read(f, regionSize)
		if err != nil || !bytes.Equal(got, k) {
			t.Fatalf("read back %d bytes: %v (equal %v)", len(k), err, bytes.Equal(got, k))
		}
	}
}

func TestWriteRefusesMisfit(t *testing.T) {
	f := region(t)
	for _, n := range []int{0, regionSize - HeaderSize + 1} {
		if err := Write(f, regionSize, make([]byte, n)); err == nil || !strings.Contains(err.Error(), "does not fit") {
			t.Errorf("kernel of %d bytes: %v, want a does-not-fit error", n, err)
		}
	}
}

// cutWriter fails every write after the first n, as a power cut would
// leave the region: what was written before stays.
type cutWriter struct {
	f *os.File
	n int
}

func (c *cutWriter) WriteAt(b []byte, off int64) (int, error) {
	if c.n == 0 {
		return 0, errors.New("power cut")
	}
	c.n--
	return c.f.WriteAt(b, off)
}
func (c *cutWriter) Sync() error { return c.f.Sync() }

// A write cut after each of its steps leaves the old kernel or a region
// Read refuses, never a header over a part of the new one.
func TestWriteCut(t *testing.T) {
	old, new := kernel(50000, 1), kernel(70000, 2)
	for steps := 0; steps <= 3; steps++ {
		f := region(t)
		if err := Write(f, regionSize, old); err != nil {
			t.Fatal(err)
		}
		err := Write(&cutWriter{f, steps}, regionSize, new)
		got, rerr := Read(f, regionSize)
		switch {
		case steps == 3 && (err != nil || !bytes.Equal(got, new)):
			t.Errorf("whole write: %v / %v", err, rerr)
		case steps == 0 && !bytes.Equal(got, old):
			t.Errorf("cut before anything: old kernel gone (%v)", rerr)
		case steps > 0 && steps < 3 && rerr == nil:
			t.Errorf("cut after %d steps: Read accepted a region being written", steps)
		}
	}
}

func TestReadRefusesDamage(t *testing.T) {
	k := kernel(40000, 5)
	cases := map[string]func(f *os.File){
		"kernel byte":  func(f *os.File) { f.WriteAt([]byte{0xff}, HeaderSize+100) },
		"length":       func(f *os.File) { f.WriteAt([]byte{0x41}, 8) },
		"length large": func(f *os.File) { f.WriteAt([]byte{0, 0, 0, 0, 1}, 8) },
		"magic":        func(f *os.File) { f.WriteAt([]byte("X"), 0) },
		"reserved":     func(f *os.File) { f.WriteAt([]byte{1}, 4000) },
	}
	for name, damage := range cases {
		f := region(t)
		if err := Write(f, regionSize, k); err != nil {
			t.Fatal(err)
		}
		damage(f)
		if got, err := Read(f, regionSize); err == nil {
			t.Errorf("%s damaged: read %d bytes without an error", name, len(got))
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(For(kernel(100, 1)).Encode(), int64(regionSize))
	f.Add(make([]byte, HeaderSize), int64(regionSize))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		h, err := ParseHeader(b, size)
		if err != nil {
			return
		}
		if h.Length <= 0 || h.Length > size-HeaderSize {
			t.Fatalf("accepted length %d for a region of %d", h.Length, size)
		}
		if !bytes.Equal(h.Encode(), b[:HeaderSize]) {
			t.Fatal("accepted header does not encode back to its bytes")
		}
	})
}
