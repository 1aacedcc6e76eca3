package poold

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/nvboot/nvboot/pool"
)

// Histogram counts spawn latencies (request received to Started sent) in
// power-of-two buckets of microseconds.
type Histogram struct {
	mu     sync.Mutex
	counts [histBuckets]uint64
}

const histBuckets = 24 // up to 2^23 µs ≈ 8 s, the last bucket open-ended

// Add records one latency.
func (h *Histogram) Add(d time.Duration) {
	us := d.Microseconds()
	i := 0
	for i < histBuckets-1 && us > int64(1)<<i {
		i++
	}
	h.mu.Lock()
	h.counts[i]++
	h.mu.Unlock()
}

// Buckets returns the non-empty buckets in order.
func (h *Histogram) Buckets() []pool.Bucket {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []pool.Bucket
	for i, c := range h.counts {
		if c > 0 {
			out = append(out, pool.Bucket{LeMicros: int64(1) << i, Count: c})
		}
	}
	return out
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
