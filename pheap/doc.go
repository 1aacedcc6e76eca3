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
// persistent Slice[T], String and Bytes headers, and Map[K, V] is a hash map;
// all of them are pointer-free and can be fields of heap objects.
//
// Named roots (Root) are the entry points: a root table in the heap maps a
// name to a typed object, created zeroed on first use.
//
// # Transactions
//
// Every change happens inside h.Update(func(tx *Tx) error). A commit writes
// one record to the log: the new contents of every line the transaction
// changed outside blocks it allocated (redo), a checksum of the lines it
// wrote in blocks it allocated, and the number of undo entries before it;
// one fence makes record and data durable, and Update returns. A line whose
// committed bytes are in no durable record must have its old bytes saved in
// an undo entry, fenced, before it changes (ranges saved together share one
// fence); lines the previous transaction wrote need not, as its record
// holds them, and map slots are stored only after the commit fence. So a
// transaction that only touches what the one before it touched, its own new
// blocks and map slots costs one fence (log.go has the protocol and why).
// If the function returns an error or panics, or the process dies before
// the commit fence, the saved bytes and the previous record's lines are
// copied back (at once, or by recovery in the next Open), which also undoes
// allocations and frees, since the allocator's lists live in the heap and
// are logged like any data. Ranges inside blocks allocated by the same
// transaction are not saved: rolling back the allocation makes their
// contents irrelevant.
//
// # Allocation
//
// Blocks are any multiple of 16 bytes, a 32-byte header included, and
// freed space is reused for any size: free blocks are split to fit a
// request and merged with free neighbours when freed, and space freed at
// the end of the used arena goes back to it (alloc.go). After every
// object is freed the arena is one piece again. ViewTx.Stats tells what
// can still be allocated: FreeBytes in all, LargestAlloc in one piece.
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
// On a file in a DAX filesystem the heap maps it with MAP_SYNC, so the CPU
// caches are the only volatile layer and the heap makes stores durable with
// CLWB (or CLFLUSHOPT, or CLFLUSH) and SFENCE from package pmem. Elsewhere it
// uses a MAP_SHARED page-cache mapping and calls msync(MS_SYNC) at each
// durability point. Heap.Mode tells which. A small transaction has one or
// two durability points (a batch of undo entries, if any; the commit):
// cheap with CPU flushes, but on a disk each msync is a device flush
// (docs/BENCHMARKS.md). arm64 uses DC CVAP (or DC
// CVAC) and DSB. The layer is the Memory interface, which tests replace
// with crashsim to enumerate the states a power cut could leave and check
// that Open recovers each of them.
//
// # Checks
//
// Open verifies, in time independent of the heap size, everything it
// relies on to recover: the superblock (magic, version, feature flags,
// checksum, layout against the file size), the log header, the log
// entries it uses (checksums, generations, the commit record's runs) and
// the root table and allocator metadata as recovery leaves them
// (checksums, fields in range, reserved bytes zero). It does not walk the
// arena: block headers, bins and the live counters are verified by
// ViewTx.Check, which reads every block and every String and Bytes value.
// Every access checks the header of the block it touches, its checksum
// included (ErrBadPtr); String and Bytes, which never change once
// written, carry a checksum of their bytes that every read verifies
// (ErrChecksum from Lookup; Get panics): a flipped bit there is an error,
// never other data. Objects of Go types change in place under the log and
// carry no checksum of their payload. A log that looks as a crash could
// leave it (a torn entry) is recovered as after that crash. Services that
// want the whole heap verified at start run Check themselves (examples/kv
// -check-on-open). docs/DESIGN.md, "Allocator and checksums", has the reasons.
//
// # Format
//
// The byte formats (superblock, log, root table, allocator metadata,
// block headers, bins) are described field by field in layout.go and
// frozen by layout_test.go. This package reads and writes format 3; it
// refuses older heaps with ErrVersion, naming the version and the way out.
//
// Design: docs/DESIGN.md#pheap.
package pheap
