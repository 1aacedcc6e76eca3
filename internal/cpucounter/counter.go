package cpucounter

import "math/bits"

// NS is count ticks of a counter running at freq Hz in nanoseconds (0 for
// no frequency), exact for any count below freq * 2^64 / 1e9: centuries
// at any timer frequency.
func NS(count, freq uint64) uint64 {
	if freq == 0 {
		return 0
	}
	hi, lo := bits.Mul64(count, 1e9)
	if hi >= freq {
		return ^uint64(0)
	}
	q, _ := bits.Div64(hi, lo, freq)
	return q
}
