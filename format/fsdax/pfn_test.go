package fsdax

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// The block the 6.1 kernel wrote for a 256 MiB label-less QEMU NVDIMM when
// told through sysfs: uuid 6e7662f0-0d2c-4b0a-9a1f-70666e646178, align 2 MiB,
// mode ram (vm.FsdaxShell). Ours must be the same bytes.
func TestMatchesTheKernel(t *testing.T) {
	want, err := os.ReadFile("testdata/kernel-pfn-256M-uuid-6e7662f0.bin")
	if err != nil {
		t.Fatal(err)
	}
	uuid := [16]byte{0x6e, 0x76, 0x62, 0xf0, 0x0d, 0x2c, 0x4b, 0x0a, 0x9a, 0x1f, 0x70, 0x66, 0x6e, 0x64, 0x61, 0x78}
	in, err := NewInfo(256<<20, uuid)
	if err != nil {
		t.Fatal(err)
	}
	got := in.Marshal()
	if !bytes.Equal(got, want) {
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("first difference at byte %d: %#x, kernel %#x", i, got[i], want[i])
			}
		}
	}
	back, err := Parse(want, 256<<20)
	if err != nil {
		t.Fatal(err)
	}
	if *back != *in {
		t.Errorf("Parse = %+v, want %+v", back, in)
	}
}

func TestParseRejects(t *testing.T) {
	in, _ := NewInfo(128<<20, [16]byte{1})
	good := in.Marshal()
	flip := func(off int) []byte {
		b := bytes.Clone(good)
		b[off] ^= 1
		return b
	}
	if _, err := Parse(flip(0), 128<<20); !errors.Is(err, ErrNoInfo) {
		t.Errorf("bad signature: %v", err)
	}
	if _, err := Parse(flip(100), 128<<20); !errors.Is(err, ErrChecksum) {
		t.Errorf("flipped padding: %v", err)
	}
	if _, err := Parse(good, 2<<20); err == nil {
		t.Error("data offset beyond a 2 MiB namespace accepted")
	}
	if _, err := Parse(good[:100], 128<<20); err == nil {
		t.Error("short block accepted")
	}
	for _, size := range []int64{0, 1 << 20, 2 << 20, 3 << 20} {
		if _, err := NewInfo(size, [16]byte{}); err == nil {
			t.Errorf("NewInfo(%d) accepted", size)
		}
	}
}

func FuzzParse(f *testing.F) {
	in, _ := NewInfo(256<<20, [16]byte{7})
	f.Add(in.Marshal(), int64(256<<20))
	f.Add(make([]byte, InfoSize), int64(0))
	if k, err := os.ReadFile("testdata/kernel-pfn-256M-uuid-6e7662f0.bin"); err == nil {
		f.Add(k, int64(256<<20)) // what the kernel itself wrote
	}
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		in, err := Parse(b, size)
		if err != nil {
			return
		}
		// Whatever parses re-encodes to a block that parses the same.
		again, err := Parse(in.Marshal(), size)
		if err != nil || *again != *in {
			t.Fatalf("re-encoding %+v: %+v, %v", in, again, err)
		}
	})
}
