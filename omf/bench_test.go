package omf

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReadBlockRelease is the fast path a reader of a mapped chunk
// pays per window: bench/omf pays it 64 times a pass.
func BenchmarkReadBlockRelease(b *testing.B) {
	p := filepath.Join(b.TempDir(), "f")
	os.WriteFile(p, make([]byte, 4<<20), 0o600)
	f, err := Open(p, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w, _ := f.ReadBlock(0, 8)
	w.Release()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w, err := f.ReadBlock(int64(i%64)*8, 8)
		if err != nil {
			b.Fatal(err)
		}
		w.Release()
	}
}
