// Package pager is a user-level pager that keeps spatial locality: a
// matrix larger than the memory it may use lives in a file on storage, its
// pages stored in the order the program will walk them (the layout,
// written once by CreateLayout and reused), and is served into a memory
// region by userfaultfd within a fixed budget, by whole runs of the walk
// rather than page by page. Pages written are tracked by write-protect
// faults and written back before eviction and at Sync. It follows the
// locality-aware memory management thesis (an 8 MiB user-level "physical
// memory" and aligned data on the swap device), with the writes its future
// work asked for.
//
// # API
//
// CreateLayout(path, Shape{Rows, Cols, Elem}, Hint, src) writes a matrix
// once: a header page, then the region's pages in the order a walk of the
// hint (RowMajor, ColumnMajor or Tiled) first touches them. The matrix is
// row-major in the region, element (i, j) at (i*Cols + j)*Elem, as Go code
// indexes a flat slice. The file is made beside path and renamed into
// place. New(Config{Budget, RunPages}) starts a pager; p.Map(path) maps a
// layout into a new region, and Region.Bytes or Float64s is the matrix.
// Several regions share one budget. Sync writes every written page back
// and fdatasyncs the layouts; Close syncs and unmaps.
//
// # Layout format
//
// layout.go, frozen by TestLayoutFrozen: magic NVPAGER1, version 1, the
// page size it was written for, rows, cols, element size, hint, tile rows
// and cols, data pages, a CRC-32C of the first 56 bytes, 4 reserved zero
// bytes; the rest of the header page is zero. A layout whose checksum,
// version, page size, shape or length is wrong is refused with ErrLayout,
// naming what. It is written in chunks of 64 consecutive layout pages, each
// gathered from the source a stretch at a time.
//
// # Serving faults
//
// The region is anonymous memory registered with a userfaultfd for
// missing-page faults and, where the kernel has them (Linux 5.7+),
// write-protect faults. A fault at walk position k reads positions k to
// k+RunPages-1 (256 KiB by default), ending early at the run's last absent
// page, with one pread, and installs the absent pages with UFFDIO_COPY, one
// ioctl per stretch consecutive in the region. Pages are installed
// write-protected; the first write raises a write-protect fault and the
// pager marks the page dirty and lifts the protection (the faulting page of
// a write is installed writable and dirty at once). A dirty page is
// protected again before it is written back, so a store racing with the
// write-back waits instead of being lost; it is written with pwritev (runs
// consecutive in the layout in one call) and dropped with MADV_DONTNEED.
// The pager write-protects only pages that are present, never a pte-none
// page, so it needs nothing newer than 5.7 (not UFFD_FEATURE_WP_UNPOPULATED,
// 6.4; the appliance runs 6.1).
//
// One descriptor takes one UFFDIO_API and a kernel refuses a feature it
// lacks, so New opens a first descriptor asking for none, reads what the
// kernel offers, and asks a second one for write-protect faults only where
// offered. A region whose UFFDIO_REGISTER refuses MODE_WP is registered
// without it. Without write tracking WriteTracking is false and Features
// says why. The descriptor is opened O_NONBLOCK: userfaultfd_poll reports
// POLLERR for a blocking one. The ioctls follow Linux's
// include/uapi/linux/userfaultfd.h (x/sys/unix has only the system call
// number).
//
// # Design
//
//   - O_DIRECT layout I/O, as swap I/O is: the budget is the only cache and
//     every miss is a read of the storage. Where the filesystem refuses
//     O_DIRECT (tmpfs) it is buffered.
//   - Adaptive read-ahead for a region walked once (adapt, serve.go): a
//     fault behind the last one starts a new pass and restores the full
//     run; a fault ahead at a page already loaded in this pass halves it (the
//     read-ahead was evicted before use); a fault just past the last run,
//     all of it still resident, doubles it. A region whose walk repeats
//     whole units always reads the full run. Measured in the product whose B
//     fills the 8 MiB budget at N = 1024: 18.7 k pages read against 266 k
//     with fixed runs, where B's faults evicted A's and C's read-ahead
//     before use (129 k pages wasted).
//   - Eviction by the walk over FIFO or LRU (evict.go). The pager sees
//     faults, never hits, so it cannot rank pages by use; it knows the order
//     each region is walked, the position of the last fault and the unit
//     holding it (the pages first touched by one row, column or tile). A
//     region whose faults go back to an earlier unit is wrapped: its walk
//     repeats, as B's does once per row of A. The victim is, in turn: a page
//     behind the current unit of a region that never wrapped; a page ahead
//     of such a region's unit, farthest first; a page of a wrapped region
//     outside its current unit, behind it highest position first, then
//     ahead farthest first (Belady: the page needed last goes first); a page
//     of the faulting region outside the run, behind the fault highest
//     position first, then past the run farthest first; then a page of
//     another region's current unit, the page of its last fault last of
//     all. Where a row does not end on a page, the first three rules keep a
//     page on either side of the current unit (spill), and a fault one page
//     back is no wrap. FIFO on a repeated walk larger than the budget missed
//     on every page: N = 1024 read 2.18 M pages against 0.27 M.
//   - The fallback without userfaultfd (ENOSYS: no CONFIG_USERFAULTFD;
//     EPERM: not root and vm.unprivileged_userfaultfd=0, after a second try
//     with UFFD_USER_MODE_ONLY, allowed unprivileged since 5.11): New still
//     succeeds, Mode is "mmap" and Reason says why. Map maps each run of
//     consecutive layout pages MAP_SHARED|MAP_FIXED at its place in the
//     region, so the program sees the same matrix and the kernel pages it;
//     Sync is msync.
//
// # Invariants
//
//   - Every byte of a region equals the matrix's, in any walk, with a budget
//     far below the data, in both modes, and at most the budget is resident
//     (Stats.MaxResident): TestReadsMatchReference.
//   - Writes survive eviction, Sync, Close and a new Map:
//     TestWritesSurviveSyncAndReopen; FuzzAccess runs decoded sequences of
//     reads, row and column stretches, writes and Syncs over every hint, run
//     lengths 1 to 3 and both modes against an in-memory copy, with a budget
//     of 8 pages.
//   - A column walk over a column-major layout reads whole runs:
//     TestRunsAreSequentialReads.
//   - A product whose B alone fills the budget is right and faults at most
//     4N times a row of C, and the pages read stay within 4 times the data:
//     TestProductBudgetIsB; past the cliff below: TestProductPastTheCliff.
//   - Serving faults allocates nothing (an allocation could start a GC
//     stop-the-world that must preempt the faulting program):
//     TestFaultsDoNotAllocate. UFFDIO_COPY past a present page installs the
//     rest: TestCopyPastPresentPage.
//   - TestLayoutErrors, TestLayoutFrozen, TestIoctlNumbers (each ioctl number
//     recomputed from _IOWR/_IOR and the struct sizes), TestReadWriteAt.
//   - On the appliance kernel (Linux 6.1) in QEMU, writes through a 64 KiB
//     budget survive Close and a new Map and are tracked by write-protect
//     faults, and the product runs; the mode is "userfaultfd", or "mmap"
//     with a reason naming CONFIG_USERFAULTFD: TestGuestPager.
//
// # Measured
//
// bench/pager (docs/BENCHMARKS.md) runs C = A × B in a child process in a
// memory cgroup of 8 MiB, against the kernel's paging of the same program
// on the same storage. In the SD-card guest on the device clock the pager
// is 5.4× faster at N = 1024 (pager_vs_swap_1024 0.185), ties at 768, and
// at 512, where everything fits, the kernel is 1.27× faster. Both read
// about the least the walk allows for their room; the kernel reads a page
// at a time (660 k reads), the pager in runs (16.5 k).
//
// # Kernel options
//
// CONFIG_USERFAULTFD (the appliance kernel has it). Write-protect faults on
// anonymous memory need CONFIG_HAVE_ARCH_USERFAULTFD_WP, which x86-64
// selects; without it every page evicted is written back. bench/pager's
// guest also uses CONFIG_MEMCG, cgroup v2 and CONFIG_SWAP.
//
// # Limits
//
//   - A fault must be served by a goroutine of the same process. A thread
//     blocked in a fault holds its P, so New raises GOMAXPROCS to at least
//     2. A stop-the-world waits for every goroutine, and one blocked in a
//     fault stops only if the runtime can preempt it there: in Go code it
//     can, in assembly (copy, bytes.Equal) it cannot, and the program hangs.
//     Region memory must be read and written by Go code: Region.ReadAt and
//     WriteAt copy with a plain Go loop. A handler in another process,
//     receiving the userfaultfd over a socket, would remove the hazard;
//     not built.
//   - Passing region memory to a system call makes a fault in kernel mode:
//     served with a full descriptor, EFAULT with a user-mode-only one.
//   - Without write-protect faults every resident page counts as dirty.
//   - Units and wrap detection suit walks that repeat whole units (matrix
//     products, stencils over tiles); a region walked at random gets the
//     last rules, around its last fault.
//   - A unit larger than the budget is a cliff for any pager: below N = 512
//     a column of B touches every page of B, so once B outgrows the budget
//     every sweep misses what does not fit (1 MiB budget: 0.15 s at N = 352,
//     21 s at N = 368, 1.9 M pages read against a floor of 1.8 M).
//   - Columns whose pages span units are not solved: at N = 768 (a row is
//     1.5 pages) a column touches two units and the eviction takes the other
//     unit's pages, which the same column needs; with a budget under B the
//     pager reads nearly every page every column touches. Keeping a group's
//     pages would need overlapping units, or a rule telling a sweep that
//     fits from one that does not.
//   - The fallback mode has no budget: the kernel decides.
//   - Faults are served under one mutex; a write racing with Sync's
//     write-back of the same page lands after it (the page is dirty again).
package pager
