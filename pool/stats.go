package pool

// The statistics poold sends in a StatsReply (JSON), as Client.Stats
// returns them.

// Stats is poold's statistics: what poolctl status and stats print.
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

// PoolState is a snapshot of one pool's parked processes and counters.
type PoolState struct {
	Idle      int   `json:"idle"`
	Starting  int   `json:"starting"`
	Want      int   `json:"want"`
	HeldBytes int64 `json:"held_bytes"` // PSS of the parked processes
	Counters
}

// Counters count what happened in one pool since poold started.
type Counters struct {
	Hits    uint64 `json:"hits"`    // spawns served by a parked process
	Misses  uint64 `json:"misses"`  // spawns that found none
	Added   uint64 `json:"added"`   // processes parked
	Reduced uint64 `json:"reduced"` // parked processes trimmed by reduce
	Died    uint64 `json:"died"`    // parked processes that exited while parked
	Failed  uint64 `json:"failed"`  // starts that failed
	Reused  uint64 `json:"reused"`  // activations that ended with the process parked again
	// OverMemory counts processes let go to keep the pool under MemoryMax:
	// started but not parked, not taken back after an activation (reuse),
	// or trimmed by reduce.
	OverMemory uint64 `json:"over_memory"`
	// AsPeer counts spawns served by a process started with the client's
	// own credentials (no User, and the client is not poold's user).
	AsPeer uint64 `json:"as_peer"`
}

// Bucket is one bucket of a latency histogram (power-of-two microseconds):
// Count latencies ≤ LeMicros (the last: any).
type Bucket struct {
	LeMicros int64  `json:"le_us"`
	Count    uint64 `json:"count"`
}
