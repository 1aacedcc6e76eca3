package cpucounter

import "testing"

// NS converts a counter at any frequency to nanoseconds exactly, QEMU's
// 62.5 MHz generic timer (16 ns a tick) and a real 54 MHz one (the
// Raspberry Pi 4's) among them, without overflowing for large counts.
func TestNS(t *testing.T) {
	for _, c := range []struct{ count, freq, want uint64 }{
		{62_500_000, 62_500_000, 1e9},
		{1, 62_500_000, 16},
		{27, 54_000_000, 500},
		{62_500_000 * 3600 * 24 * 365, 62_500_000, 1e9 * 3600 * 24 * 365},
		{5, 0, 0},
		{^uint64(0), 1, ^uint64(0)},
	} {
		if got := NS(c.count, c.freq); got != c.want {
			t.Errorf("NS(%d, %d) = %d, want %d", c.count, c.freq, got, c.want)
		}
	}
}

// Two reads in order never go backwards.
func TestReadMonotonic(t *testing.T) {
	if !Available {
		t.Skip("no counter on this architecture")
	}
	a := Read()
	b := Read()
	if b < a {
		t.Errorf("second read %d before first %d", b, a)
	}
}
