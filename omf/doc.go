// Package omf is on-memory file access: a file's blocks are mapped into the
// process and handed out as []byte windows that alias the mapping, instead of
// being copied by read(2). It follows the OMF functions of the AnT
// microkernel (readblock, syncblock, readbyte), on Linux. On a DAX
// filesystem (the appliance's pmem) the mapping is the persistent memory
// itself; elsewhere it is the page cache. examples/omfstatic serves static
// files from it through http.ServeContent.
//
// # API
//
// Open(path, Options), or NewFile for a file already open (from os.Root,
// say), gives a *File:
//
//   - ReadBlock(blkoff, nblocks) returns a read-only *Window whose Bytes
//     alias the mapping: no byte is copied. Blocks are the page size.
//   - ReadAt (an io.ReaderAt, AnT's readbyte) copies from the mapping. After
//     the first touch a read makes no system call unless it reaches the end
//     of the file as last seen, where it asks fstat once.
//   - WriteBlock returns a writable window of its own; SyncBlock(w, off, n)
//     makes a range of it durable. On DAX the window is mapped
//     MAP_SHARED_VALIDATE|MAP_SYNC and the sync is package pmem's Flush and
//     Fence, the code pheap makes its transactions durable with. Elsewhere,
//     and on a DAX file whose filesystem refuses MAP_SYNC with EOPNOTSUPP
//     (virtio-pmem, virtiofs with DAX; the File remembers it), the window is
//     MAP_SHARED and the sync is msync(MS_SYNC) of the pages holding the
//     range, which on virtio-pmem ext4 turns into the device's flush
//     request (its host fsyncs the file). File.Mode says "dax",
//     "dax-msync" (a writable File on such a device: Open asks whether
//     MAP_SYNC is taken, one mmap and munmap, so the mode is true from the
//     start) or "pagecache".
//   - Unmap gives back every chunk no window holds and no ReadAt is copying
//     from, and keeps the File open: a service that reads a file in bursts
//     frees its address space and page tables, and the next read maps the
//     chunk again.
//
// DAX is the inode's STATX_ATTR_DAX, from the one statx that also gives the
// size (Linux 5.8 on). An older kernel is asked as pheap asks, by whether it
// accepts MAP_SYNC for the file (an mmap and a munmap per Open); one without
// statx, or a seccomp filter that refuses it, gets fstat first.
//
// # Design
//
// A File maps the file in aligned chunks (Options.ChunkSize, 2 MiB by
// default: the x86-64 huge page, so an aligned DAX extent is one PMD entry),
// read-only, and keeps them until Unmap or Close. Chunks live in a slot
// table read with atomic loads; a reader takes a reference with a CAS loop
// and drops it after the copy. A read-only window inside one chunk shares
// the chunk's mapping, so once the chunk is mapped ReadBlock is two atomic
// loads and a CAS. A window across chunks, and every writable window, gets
// a mapping of its own, unmapped on Release. A chunk is mapped whole even
// past the end of the file, so a file that grows needs no second mapping;
// reads stop at the size.
//
//   - Chunks kept mapped over a mapping per call: AnT's OMF beat mmap
//     because the blocks were already mapped when asked for; mapping per
//     call costs a system call and page faults for every window, which is
//     what demand paging costs too.
//   - The window that maps a chunk is populated by touching a byte of each
//     of its pages (prefault, chunk.go; off with Options.NoPopulate), not the
//     whole chunk: without 2 MiB-aligned extents every page is a fault of
//     its own, and populating the chunk made a window of 8 pages cost 512
//     faults (1.9 ms against the kernel's 52 µs for the region, measured).
//     On the page cache MAP_POPULATE of the chunk read 2 MiB from storage
//     for a 32 KiB window, where a touch leaves the amount to read-ahead.
//   - Touches over MAP_POPULATE or MADV_POPULATE_READ: both go through
//     get_user_pages, which on DAX walks the range 4 KiB at a time even
//     where the first fault mapped 2 MiB with a PMD entry (162 µs of guest
//     time per chunk on the device clock, against 20 µs for the mmap, one
//     fault and 511 loads).
//   - Truncation: a page the file no longer covers raises SIGBUS on access,
//     which kills a Go program. ReadAt and Window.Read run the access under
//     debug.SetPanicOnFault and recover, turning the fault into ErrTruncated
//     carrying the faulting address (*Fault); Guard(fn) does the same for
//     code that reads Window.Bytes directly. SetPanicOnFault sets a flag on
//     the goroutine: no system call. Rejected: an fstat before every read
//     (the system call the package exists to avoid), and a lease
//     (F_SETLEASE only tells the holder someone opened the file for
//     writing; it does not stop a truncation).
//
// Whether a DAX chunk can be one PMD entry is the filesystem's doing: its
// blocks must start 2 MiB apart on the device. mkfs.ext4 -E
// stride=512,stripe_width=512 makes ext4 align large allocations so, as the
// appliance text store's 2 MiB bigalloc clusters do; with mkfs's defaults
// the measured file started 44 KiB past a 2 MiB boundary and every page was
// a fault of 3.7 k instructions.
//
// # Invariants
//
//   - Every byte read equals the file's: TestReadAtMatchesFile,
//     TestReadBlockAliasesFile, TestGrowingFile, TestConcurrentReaders
//     (-race), FuzzAccess (an in-memory copy as the reference, through
//     reads, held windows, writes, appends, Unmaps and truncations done
//     behind the File's back).
//   - Writes through a window are seen by ReadAt at once and are in the file
//     after SyncBlock, Close and a reopen: TestWritesSurviveSyncAndReopen.
//   - A mapping in use is never unmapped. Chunks carry a reference count
//     (windows and ReadAt copies in progress); Close refuses with ErrBusy
//     while windows are held and changes nothing; a second Release is
//     ErrReleased, never a second munmap. Close and Unmap take a chunk only
//     by swapping its count from 0 to a dead mark, so a reader cannot take
//     it between the check and the munmap; a reader that loaded the dead
//     chunk maps a new one. Unmap skips held chunks; Close waits out a
//     ReadAt still copying: TestWindowLifetime, TestUnmap (the kernel's
//     /proc/self/maps shows the chunks gone, a held window's kept),
//     TestConcurrentReaders (four readers go on while Unmap gives back
//     mappings 200 times under them; an Unmap that checks the count and
//     then marks the chunk, instead of one CAS, fails it).
//   - A truncated file is caught when the window is read, not when it is
//     made (ErrTruncated, never a crash): TestTruncatedUnderWindow,
//     FuzzAccess.
//   - Read-only Files refuse writes (ErrReadOnly); block ranges outside the
//     file are ErrRange: TestReadOnlyRefusesWrites, TestOpenErrors.
//   - On DAX (QEMU, ext4 dax=always on an fsdax NVDIMM) the File is in mode
//     "dax" and the kernel accepts MAP_SYNC as statx said; stores made
//     durable by SyncBlock alone (no Close, no fsync) are in the file after
//     a power cut; windows read between Unmaps read the pmem's bytes; a
//     window read after a truncation returns ErrTruncated: TestDAXWindows
//     (skipped without a kernel). The same on virtio-pmem, where the
//     kernel refuses MAP_SYNC and the writable File is in mode dax-msync. TestDAXDetection holds the two DAX
//     answers together on the host, and TestDAXPathsOnPageCache takes the
//     DAX read and write paths on a page-cache file.
//
// # Measured
//
// bench/omf (docs/BENCHMARKS.md) times the access to a 32 KiB region in
// units of 1 B to 32 KiB, each unit handed to a consumer that reads every
// cache line; the DAX guest runs on the device clock. On DAX with 2 MiB-
// aligned extents: against read(2) at 4 KiB units omf takes 0.099×;
// against mmap on demand paging, a region on its own with the file open on
// both sides, 0.544× (omf_vs_mmap_32k: the kernel takes 8 faults for the
// region, omf one PMD fault for the chunk); with the file opened and closed
// for every region on both sides 0.702×. When both map once for the 64
// regions of a 2 MiB span omf is 1.18×: the same PMD fault plus omf's
// per-window bookkeeping. On the host's page cache, which has no PMD
// mappings for ext4 files, a region on its own costs omf 1.19× the kernel's
// per-region mmap.
//
// # Limits
//
//   - Window.Bytes read directly is unguarded: a service that may see its
//     files truncated reads through Read, Guard or ReadAt. Go cannot keep a
//     slice from outliving Release; using it after Release is a bug the
//     package cannot catch.
//   - Past the new end of a truncated file but inside its last page, a read
//     returns the zeros the kernel maps there until the size is asked again
//     (a read at or past the old end asks it).
//   - Chunks stay mapped until Unmap or Close: address space and page tables
//     grow with the part of the file read. Nothing unmaps on its own (no
//     budget, no LRU).
//   - A window costs a heap allocation (the *Window that makes a second
//     Release an error): ReadBlock and Release together take 500–860
//     instructions, which keeps omf above a mapping kept for a whole 2 MiB
//     span on aligned DAX.
//   - A File is a view of one file. examples/omfstatic keeps one per name and
//     opens it again when a stat shows another inode, size or time; a file
//     replaced while a request reads it stays mapped until that request
//     ends.
//   - Writes never grow the file (WriteBlock refuses past the end).
package omf
