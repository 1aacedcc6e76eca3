// Package crashsim simulates power cuts on persistent memory for tests.
//
// A Recorder stands in for a mapping of persistent memory. The code under
// test reads and writes Bytes directly, as it would a real mapping, and calls
// Flush and Fence where it would issue CLWB and SFENCE. The recorder keeps a
// shadow image of what is certainly durable and, at every fence, notes which
// cache lines differ from it (stored to, maybe flushed, not yet fenced) and
// which lines the fence makes durable (those flushed since the last fence).
//
// States then replays that trace and yields the images a power cut could have
// left: for every fence, the durable image just before it plus a subset of the
// lines still in flight, each either written back or not. The workload runs
// once in write mode; each state is then opened and checked (check mode).
// This is PMDK's pmreorder idea done in-process.
//
// # Design
//
//   - In-process over an external store log: pheap's Memory interface is
//     the seam, so the real heap code runs unchanged and a plain go test
//     enumerates and checks the states.
//   - Stores are found by comparing cache lines at each fence, not by
//     trapping each store: no instrumentation of the code under test.
//   - All subsets of the in-flight lines when there are few
//     (Options.Exhaustive, default 4, so 16 states), "none", "all" and
//     random subsets from a fixed seed above that (Options.Samples): the
//     count stays bounded and a failure always reproduces.
//   - Options.Torn adds states where each in-flight line is written back
//     word by word: persistent memory promises 8-byte atomicity (WordSize),
//     not whole lines.
//
// # Invariants
//
//   - A line is durable only after it was flushed and a fence followed; a
//     line stored after its flush is in flight again (TestStoreAfterFlush,
//     TestUnflushedStaysInFlight).
//   - Data flushed and fenced before a later store is in every state that
//     holds the later store, and a Mark passed means what it marks is
//     there (TestOrdering).
//   - The same seed yields the same states (TestSamplingDeterministic).
//   - Torn states change whole 8-byte words only (TestTornWords).
//   - A flush outside the memory panics, so a wrong offset in the code
//     under test is found (TestFlushOutOfRangePanics).
//
// pheap's crash tests (TestCrashStates, TestCrashAllocator, ...) and the
// tests that turn protocol steps off (TestCrashProtocolBreakagesDetected)
// show that the simulator finds what a missing flush or fence breaks.
//
// # Limits
//
//   - A line written twice between fences has only its old and its newest
//     content as candidates; the intermediate value is not tried.
//   - Above Options.Exhaustive in-flight lines the states are a sample.
//   - A Recorder is not safe for concurrent use: the workload is
//     single-threaded.
package crashsim
