// Package pheap is a persistent Go heap on a mapped file: objects survive
// restarts and power cuts, and a service finds its state in place at boot
// instead of loading it.
//
// # Objects and references
//
// Objects are ordinary Go values of pointer-free types: numbers, bools,
// arrays and structs of those. A type holding a pointer, slice, string, map,
// channel, func, interface or unsafe.Pointer is refused at run time with the
// path of the offending field (CheckType). References between objects are
// offsets from the start of the heap (Ptr[T], 0 = nil), so the file may be
// mapped at a different address on every run. Variable-length data uses the
// persistent Slice[T], String and Bytes headers, and Map[K, V] is a hash map
// with open addressing; all of them are pointer-free and can be fields of
// heap objects.
//
// Named roots (Root) are the entry points: a root table in the heap maps a
// name to a typed object, created zeroed on first use.
//
// Create(path, size) makes a heap; Open(path) opens one and recovers what a
// crash interrupted. Create builds the heap under a temporary name beside
// path (.NAME.creating), syncs it and links it to path: link(2) fails where
// a file exists, so nothing is replaced, and a power cut during Create
// leaves no heap or a whole one, never zeros that every later Open refuses.
//
// # Transactions
//
// Every change happens inside h.Update(func(tx *Tx) error). If the function
// returns an error or panics, or the process dies before the commit fence,
// the transaction is rolled back (at once, or by recovery in the next Open),
// which also undoes its allocations and frees: the allocator's lists live
// in the heap and are logged like any data. View runs read-only
// transactions.
//
// # Concurrency
//
// A Heap is safe for concurrent use. One Update runs at a time (a mutex);
// View transactions run concurrently with each other but not with an
// Update (a sync.RWMutex), so readers always see committed state. A
// transaction and the Go pointers obtained through it (Ptr.Ref,
// Ptr.Modify, Bytes.View) must not be used after its function returns.
// Update and View must not be nested. A file is opened by one Heap at a time:
// Open takes an exclusive flock and a second Open fails with ErrLocked.
//
// # Durability
//
// On a file in a DAX filesystem the heap maps it
// MAP_SHARED_VALIDATE|MAP_SYNC (the validate flag makes an unsupported flag
// fail instead of being ignored), so the CPU caches are the only volatile
// layer, and stores are made durable with package pmem's Flush (CLWB, else
// CLFLUSHOPT, else CLFLUSH) and Fence (SFENCE). Elsewhere the mapping is
// MAP_SHARED and each durability point is an msync(MS_SYNC), which on a
// disk is a device flush. So too on a DAX file of an asynchronous device,
// virtio-pmem (Firecracker's, Cloud Hypervisor's, QEMU's virtio-pmem-pci):
// the kernel maps the pmem but refuses MAP_SYNC (EOPNOTSUPP), because the
// data is durable only once the host has written its file, and ext4 turns
// the msync into the device's flush request, which the host answers after
// an fsync. A CPU flush alone would reach only the host's page cache, so
// the heap never claims mode dax there. Heap.Mode says which ("dax" or
// "msync"). The
// layer is the Memory interface, which tests replace with package crashsim
// to enumerate the states a power cut could leave.
//
// # Format
//
// This package reads and writes heap format 3 (MajorVersion). The byte
// formats are field lists in layout.go, frozen by TestLayoutFrozen. The
// file is, in order:
//
//	0          superblock (one page; 256 bytes used, CRC-32C, written
//	           once at Create and never again)
//	LogOff     log: a header line, then two areas of entries
//	RootsOff   root table: 128 entries of 64 bytes (name, Ptr, type
//	           fingerprint and size, masked CRC-32C)
//	AllocOff   allocator metadata, 2048 bytes: Top, LastSize, LiveBytes,
//	           LiveObjects, their masked CRC-32C, 221 bin heads
//	ArenaOff   the arena: blocks, each a 32-byte header and a payload
//
// The log takes a sixteenth of the heap, between 16 KiB and 64 MiB; one
// transaction may use half of it. Fresh blocks cost the log only a run
// descriptor each, so a 64 MiB heap's 2 MiB per transaction holds kv's
// largest put many times over, and the arena keeps 93.7 % of a 64 MiB heap.
//
// A block header holds the block's Size (a multiple of 16, at least 48),
// the size of the block before it (PrevSize), the tag of its Go type (0 for
// raw String and Bytes data and for free blocks), its State (allocated or
// free, any other value is corruption), a raw block's Pad (data length is
// Size-32-Pad) and DataSum (masked CRC-32C of the data), and HdrSum (masked
// CRC-32C of the header and, in a free block, of its two list links, which
// follow the header).
//
// An older format is refused with ErrVersion, naming the file, the version
// and the way out. A format 2 heap cannot be migrated in place: its headers
// are 16 bytes, so every object would move and every reference to it, in
// objects whose types pheap cannot read, would have to change.
//
// # Commit protocol
//
// A write transaction of generation g writes log area g%2, so the record
// of the transaction before it stays intact. Each cache line it changes is
// one of:
//
//   - fresh: inside a block it allocated; nothing is saved;
//   - covered: written by the newest committed transaction, whose record
//     holds its committed contents; changed in place, restored from that
//     record on rollback;
//   - deferred: a map slot; stored only after the commit fence;
//   - logged: anything else; an undo entry saves it, and a fence makes the
//     entry durable before the line changes.
//
// The commit record carries the new contents (redo) of every logged,
// covered and deferred line, and a CRC-32C of the fresh lines it names (the
// in-place runs). Record and data are flushed and one fence makes them
// durable; then Update returns. So a transaction that touches only what
// the previous one touched, its own new blocks and map slots costs one
// fence; each batch of logged lines costs one more. Entries carry the
// generation and a random nonce per attempt, so entries of a rolled-back
// attempt never pass for a later one's.
//
// Recovery reads the first entry of both areas: if the newest generation
// committed (record whole, in-place checksum true) its redo is stored
// again; otherwise its undo entries are copied back, newest first, then the
// previous record's redo, and its record is spoilt. A crash during recovery
// is recovered the same way. Close commits an empty generation, so the next
// Open has nothing to redo and reads only the superblock, the log and the
// metadata before the arena. log.go has the protocol in full and why each
// step is needed.
//
// # Allocator
//
// Boundary tags with segregated bins, splitting and immediate merging
// (alloc.go, block.go). A request of n bytes takes a block of
// max(48, roundup16(n+32)) bytes, found in this order:
//
//  1. under 1 KiB, the head of the block's exact bin;
//  2. above, the first of the first 8 blocks of its bin that fits;
//  3. the head of the first non-empty bin above, where any block fits (a
//     bitmap in DRAM, derived from the bin heads and rebuilt after a
//     rollback, finds that bin);
//  4. the rest of the request's own bin;
//  5. fresh space at Top.
//
// A block with at least 48 bytes to spare is split: the remainder becomes a
// free block in its own bin, and the next block's PrevSize changes. Free
// merges the block with a free block before it (found through PrevSize),
// after it, or both; a merged block that ends at Top moves Top back instead
// of going into a bin. The headers swallowed by a merge are zeroed, so a
// stale reference or a second free fails the header check (ErrBadPtr) and
// is never taken for a live block.
//
// Bins (binFor, frozen by TestLayoutFrozen): under 1 KiB one bin per size
// (48, 64, ... 1008 bytes: 61 bins); from 1 KiB on four bins per power of
// two ([1024, 1280), [1280, 1536), ...) up to 2^50.
//
// ViewTx.Stats reports FreeBytes (ArenaSize-LiveBytes) and LargestAlloc
// (the larger of the highest non-empty bin's largest block and the space
// past Top, less a header; it reads that one bin's list). kv's /stats
// reports them as heap_free and heap_largest_alloc.
//
// # Crash consistency of the allocator
//
// The allocator's state lives in the heap and changes only inside
// transactions. Each operation first stages every change it will make
// (allocStage: headers, links, bin heads, counters, the next block's
// PrevSize), reading through the stage so that a list operation sees its
// own earlier changes; applyStage then saves every range whose bytes change
// (undo entries, or nothing for lines covered by the last commit's redo),
// fences once, and writes. No write comes before the save it needs, so a
// rollback or recovery restores the lists with the data that refers to
// them: nothing leaks and nothing is handed out twice. An allocation or a
// free costs at most one fence before the commit.
//
// Some lines are written without a save, because their bytes mean nothing
// unless the transaction commits:
//
//   - the payload of a new block (inside the old free block past its header
//     and links, or past Top): fresh lines, checked at commit by the
//     in-place checksum; except the payload of a block freed earlier in the
//     same transaction (freedData), which a rollback brings back and which
//     is saved like live data when reused;
//   - the header of a free block split off, and fresh header lines of any
//     free block the transaction leaves (lineNew): not saved, but put in the
//     commit record's redo, so the next transaction may take that block
//     without a log entry and without a fence.
//
// The in-place checksum must stay true while the next transaction runs,
// since recovery may test it until that transaction writes to its log.
// Before its first log entry the next transaction writes only lines in the
// last redo and lines in free space (past Top, or a free block's payload).
// So commit leaves out of its in-place runs the payload lines of every free
// block it made or changed (freeBlocks, kept exact as the stage applies) and
// every line past Top: once it commits their bytes mean nothing.
//
// # Checksums
//
// CRC-32C (Castagnoli, hash/crc32) covers every block header (a free
// block's links included), the data of every raw block (String, Bytes), the
// allocator's counters and every root entry; the superblock and the log
// entries carry it too. Every access checks the header of the block it
// touches; every read of raw data checks its DataSum (Bytes.Lookup,
// String.Lookup, Get, View, map key comparisons); Open checks the counters
// and the roots; ViewTx.Check verifies all of them, a scrub. Bad data is
// ErrChecksum naming the offset and both sums; a header that fails is
// ErrBadPtr wrapping ErrChecksum (an offset that points at no header fails
// the same way); bad metadata reached through the heap (neighbours, links,
// counters, roots) is ErrCorrupt. A flipped bit is an error where it is
// read, never other data and never a panic.
//
// The checksums stored in the heap's writable part are masked, as LevelDB
// and the Snappy framing format mask theirs: rotr(crc, 15) + 0xa282ead8. A
// plain CRC-32C stored right after the bytes it covers turns them into a
// codeword, and a larger CRC-32C over both (the log's, over a redo line
// holding them) cannot see them change together, because CRCs are linear:
// a torn redo copy of the counters' line passed its record's checksum. The
// mask, a rotation and an addition, is not linear over GF(2)
// (TestMaskedSumsDefeatNestedCRC shows the blind spot and its removal).
//
// # Checks
//
// Open verifies, in time independent of the heap size, everything it
// relies on to recover: the superblock (magic, version, feature flags,
// checksum, layout against the file size), the log header, the log
// entries it uses (checksums, generations, the commit record's runs) and
// the root table and allocator metadata as recovery leaves them
// (checksums, fields in range, reserved bytes zero). It does not walk the
// arena: ViewTx.Check reads every block, bin and raw value (examples/kv
// -check-on-open runs it at start). A log that looks as a crash could
// leave it (a torn entry) is recovered as after that crash.
//
// # Invariants
//
//   - I1: blocks tile [ArenaOff, Top); each Size is a multiple of 16 and at
//     least 48; PrevSize is the previous block's Size (0 for the first);
//     LastSize is the last block's Size. Checked by Check, by readHdr's
//     bounds on every header, and by free against the neighbour it finds.
//   - I2: no two free blocks are neighbours; no free block ends at Top
//     (Check). With I1, freeing everything leaves the arena one piece.
//   - I3: each free block is on exactly one list, the one of binFor(Size),
//     its links agree both ways, and a head's Prev is 0 (Check). Every list
//     operation also checks the blocks it touches: a bad link is
//     ErrCorrupt, never a wild write.
//   - I4: LiveBytes and LiveObjects are the sums over allocated blocks
//     (Check; Open bounds them).
//   - I5: every header's HdrSum and every raw block's DataSum match (every
//     access; Check for all).
//   - I6: the counters' and each root entry's checksums match (Open,
//     lookupRoot, Check).
//   - Every write an Update acknowledged is there after a crash; a
//     transaction that did not return is wholly undone.
//   - A failed Open changes nothing in the file.
//
// # Decisions
//
//   - Pure Go with explicit transactions over a forked toolchain (go-pmem)
//     or everything persistent (Matsumoto et al.'s OpenJDK, 200–500 %
//     overhead): the standard toolchain, and only what a transaction changes
//     is persisted, at the cost of pointer-free types and offsets.
//   - A redo commit record with undo entries only for lines in no durable
//     record, over a pure undo log with a commit mark: one fence per small
//     update (1.0002 measured, 1.0034 per map insert, the rest being the
//     map's growths) against 2.0002. A line whose committed bytes are in no
//     durable record still needs its undo entry fenced before it changes: a
//     cache may write the line back at any moment, unordered with the flush
//     of an undo copy in the same epoch. The commit copies and checksums the
//     redo: on a no-flush map-overwrite microbenchmark about 18 % more CPU.
//   - Batched undo entries: the ranges an allocation, a free or a map insert
//     saves share one fence.
//   - Boundary tags with segregated bins over a power-of-two buddy allocator
//     (a 1 MiB value would take a 2 MiB block, and a block merges only with
//     its buddy); over PMDK's chunks and runs (denser for small objects, but
//     two allocators and a chunk header array: more format and more crash
//     states; values up to 1 MiB would span chunks); over one
//     address-ordered free list (first fit costs O(free blocks)).
//   - PrevSize over dlmalloc's footer and previous-free bit: with the bit,
//     every free and exact-fit allocation would change the next header, one
//     more saved line per operation; PrevSize changes only when sizes do.
//   - The non-empty-bins bitmap in DRAM over TLSF's bitmap in the heap,
//     which would be one more logged line per operation.
//   - 32-byte headers over 16-byte ones: 16 bytes have no room for
//     PrevSize, two checksums and the data length, and a data checksum kept
//     in the reference would not let Check scrub values without their
//     references. The cost is 16 bytes per object.
//   - No compaction: references are offsets inside user objects pheap
//     cannot read, so blocks cannot move.
//   - No checksum over objects of Go types: they change in place through
//     Modify, so a whole-object sum would be recomputed at each commit (a
//     map's 1 MiB slot table on every put), and per-line sums would be
//     another format and a cost on every write. The log's checksums still
//     catch torn writes of these objects.
//   - CRC-32C over CRC-32 (IEEE): 7.4 ns against 55 ns for a 28-byte header
//     and 10.4 against 5.1 GB/s on 4 KiB (Go uses carry-less multiplication
//     for IEEE only from 64 bytes); over CRC-64 (1.3 GB/s, no hardware
//     path), SHA-256 (1.5 GB/s; cryptographic strength buys nothing against
//     media errors), xxHash (not in the standard library) and Adler-32 (weak
//     on short inputs). CRC-32C runs on the SSE4.2 and arm64 CRC
//     instructions (23.6 GB/s measured), catches every burst of up to 32
//     bits, misses other errors with probability about 2^-32, and is the
//     one algorithm of the superblock and the log already.
//   - fallocate at Create, not zero-filling: zero-filling was tried so that
//     no first MAP_SYNC store waits for a journal commit, and measured no
//     better in the fsdax guest.
//
// # Measured
//
// docs/BENCHMARKS.md has the commands and the runs. Durability costs 0.25
// of the map workload's no-flush throughput (paired blocks of 200
// transactions). Against libpmemobj with the same CLWB+SFENCE: 1.27× the
// throughput on small updates on the host. Against bbolt with fsync on the
// same fsdax mount: 19.3× (a bbolt commit on DAX ext4 is a journal commit
// to memory, about 20 pheap transactions). Open to first read: 0.19 ms for
// 1 MiB and 0.14 ms for 1 GiB. Checksums cost a kv-like durable put and get
// of 4 KiB values 5 % (the get alone 8 %; 64 KiB values 10 %, the get 16
// %); a header-checked object read 74 ns (BenchmarkObjectGet); Check of a
// 64 MiB heap of 390,000 small objects 29 ms.
//
// # Tests
//
// The format: TestLayoutFrozen, TestSuperblockEncoding. Behaviour:
// TestCreateOpenRoundTrip, TestAbortAndPanicRollBack, TestFreeReuse,
// TestFreeThenReuseInOneTxRollsBack, TestPointerTypesRefused,
// TestRootTypeMismatch, TestOpenErrors (an older format named with the way
// out, the file unchanged), TestStickyError, TestLogFull,
// TestReferenceTypeSizes, TestSliceStringBytes, TestMapAgainstGoMap,
// TestMapStringKeys, TestMapRefusesPaddedKey,
// TestMapObjectsAccountsForLiveObjects, TestConcurrentViewsSeeCommittedState
// (-race), TestCreateAfterCutShortCreate. Open: TestOpenCleanHeapWritesNothing,
// TestOpenRefusesInconsistentLog, TestRecoveryOfWholeRecordThenMore,
// TestOpenAfterCloseReadsOnlyMetadata, FuzzOpen (damaged metadata fails
// cleanly, never a panic).
//
// Crashes, through crashsim: TestCrashStates, TestCrashCollections and
// TestCrashAllocator open and check every state a power cut could leave
// (crashes during recovery included) of their workloads; TestCrashAllocator's
// splits, merges both ways and gives back to Top, in and across
// transactions, some rolled back, and asserts the state after an op or the
// next, Check clean, no leak, every value read back. TestCrashClose covers
// Close. Tests that must catch a broken protocol: TestCrashMissingFlushDetected,
// TestCrashProtocolBreakagesDetected (each step turned off in turn, the
// freed-data rule and the saving of staged changes among them),
// TestInPlaceSumGuardsFreshLines, TestFreedLinesLeftOutOfInPlaceRuns.
//
// Allocator and checksums: TestFreedSpaceReusableAtAnySize (fill with 1 MiB
// values, free all, refill at 1 KiB, 100 KB and 1 MiB: at least 90 % of the
// heap each; a 1 MiB value takes at most 1 MiB + 64 bytes),
// TestChecksumsCatchFlippedBits (a bit flipped in value data, string data,
// a header, a free block's link, the counters or a root entry: an error
// where read, and from Check or Open), TestMaskedSumsDefeatNestedCRC.
// The CPU's flush instructions on every commit path (mode "dax" over a
// page-cache mapping): TestCPUFlushPath. On arm64: TestArm64UnderQemuUser
// runs the package's tests, crash simulations included, cross-built under
// qemu-aarch64-static on a CPU without DCPoP (DC CVAC) and one with it (DC
// CVAP). Outside the package: TestChurnKeepsHeapAllocatable (bench/pheap),
// TestHeapReusesFreedSpaceAcrossSizes, TestGetCorruptValue,
// TestKillKeepsAcknowledged, TestCheckOnOpen (examples/kv),
// TestDAXHeapSurvivesPowerCut (QEMU, ext4 dax=always: mode "dax" on an
// NVDIMM; mode "msync" on virtio-pmem, where QEMU's trace counts a flush
// request answered after the host's fsync for every commit reported) and
// TestPowercut (host/nvbootcmd). A power cut in QEMU loses no cache line
// (QEMU writes guest stores straight to the NVDIMM's file), so the ordering
// of flushes and fences is held by the crash simulator, not by the VM tests.
//
// # Limits
//
//   - Payloads of Go-typed objects carry no checksum. A flipped bit in a
//     map's slot can make a key read as absent, or make the value reference
//     fail its header or length check; it never yields another value's
//     bytes.
//   - User data that embeds an unmasked CRC-32C of the bytes before it is
//     invisible to the log's CRC-32C when a redo line of it tears. A
//     non-linear log checksum would close it, at a cost not measured.
//   - The largest single allocation can be less than the free space when
//     live blocks sit between free ones. In kv after every key is deleted the
//     map's slot table stays where its last growth put it: heap_free is 94 %
//     of the heap, heap_largest_alloc 77 %; 1 MiB values still refill 92 %.
//     Placing big blocks from the other end of the arena would need a second
//     Top in the format.
//   - An allocation and a free cost 1.13 µs for the pair in process memory
//     (BenchmarkAllocFree): they read and stage the neighbours' headers.
//   - A transaction may save at most half the log (ErrLogFull).
//   - Types are pointer-free; references are offsets; nothing moves.
package pheap
