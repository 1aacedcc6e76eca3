// Package omf is on-memory file access: a file's blocks are mapped into the
// process and handed out as []byte windows that alias the mapping, instead of
// being copied by read(2). It follows the OMF functions of the AnT
// microkernel (readblock, syncblock, readbyte), on Linux.
//
// On a DAX filesystem (the appliance's pmem) the mapping is the persistent
// memory itself; elsewhere it is the page cache. A File maps the file in
// aligned chunks (2 MiB by default; on DAX a chunk whose blocks are 2 MiB-
// aligned on the device is one PMD entry) and keeps them until Unmap or
// Close: ReadBlock and ReadAt inside a chunk already mapped make no system
// call. The window that maps a chunk is populated when it is made. Writes go
// through writable windows (WriteBlock) and SyncBlock, which on DAX flushes
// the CPU caches with pheap's flush code (package pmem, MAP_SYNC
// mapping) and elsewhere, or where the filesystem refuses MAP_SYNC, calls
// msync.
//
// Windows are reference counted: a chunk is never unmapped while a window on
// it is held, Close refuses (ErrBusy) while windows are held, and a second
// Release is an error, never a second munmap. A file truncated under a
// mapping makes the CPU fault (SIGBUS); ReadAt and Window.Read turn that
// fault into ErrTruncated with debug.SetPanicOnFault. Window.Bytes is the
// unguarded zero-copy slice: code that reads it directly accepts the fault
// or runs under Guard.
//
// Design: docs/DESIGN.md#omf.
package omf
