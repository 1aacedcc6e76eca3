package poold

import (
	"encoding/json"
	"sync"
	"time"
)

// Histogram counts spawn latencies (request received to Started sent) in
// power-of-two buckets of microseconds.
type Histogram struct {
	mu     sync.Mutex
	counts [histBuckets]uint64
}

const histBuckets = 24 // up to 2^23 µs ≈ 8 s, the last bucket open-ended

// Bucket is one histogram bucket: Count latencies ≤ LeMicros (the last: any).
type Bucket struct {
	LeMicros int64  `json:"le_us"`
	Count    uint64 `json:"count"`
}

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
func (h *Histogram) Buckets() []Bucket {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Bucket
	for i, c := range h.counts {
		if c > 0 {
			out = append(out, Bucket{int64(1) << i, c})
		}
	}
	return out
}

// Stats is what poolctl status and stats print.
type Stats struct {
	Programs []ProgramStats `json:"programs"`
	// SpawnLatency is over every program: hits and misses.
	SpawnLatency []Bucket `json:"spawn_latency"`
	// HeldBytes is the PSS of every parked process.
	HeldBytes int64 `json:"held_bytes"`
	// Connections counts the client connections accepted (a client that
	// keeps its connection makes one for many spawns).
	Connections uint64 `json:"connections"`
}

// ProgramStats is one pool.
type ProgramStats struct {
	Name   string `json:"name"`
	Active int    `json:"active"` // activated and still running
	PoolState
	HitLatency  []Bucket `json:"hit_latency"`
	MissLatency []Bucket `json:"miss_latency"`
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
