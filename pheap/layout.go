package pheap

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The on-media format. Every structure is little-endian at a fixed offset;
// layout_test.go asserts each size and offset so a change cannot slip in.
// Bump MajorVersion for any change an older reader would misread.
//
// File layout (all offsets from the start of the file):
//
//	0          superblock, one page (only SuperblockSize bytes used)
//	LogOff     log: log header (one cache line), then two areas of entries
//	RootsOff   root table: RootsCount entries of rootEntrySize bytes
//	AllocOff   allocator metadata (allocMetaSize bytes)
//	ArenaOff   the arena: blocks, each a header and a payload, up to Size
//
// The superblock is written once, at creation, and never again: everything
// that changes lives in the regions after it and is updated under the undo
// log, so a torn superblock write can only happen during Create.
const (
	// Magic identifies a pheap file.
	Magic = "NVPHEAP\x00"
	// MajorVersion is the format version this package reads and writes.
	// Version 3 (boundary-tag allocator, checksummed block headers, raw
	// data, root entries and allocator counters) replaced version 2's
	// size-class allocator; version 2 (redo commit records) had replaced
	// version 1's log. decodeSuperblock names the way out for both.
	MajorVersion = 3
	// MinorVersion counts compatible additions within MajorVersion.
	MinorVersion = 0
	// SuperblockSize is the number of superblock bytes the checksum covers.
	SuperblockSize = 256
	// MinSize is the smallest heap Create accepts.
	MinSize = 64 << 10

	lineSize = 64
	pageSize = 4096
)

// Superblock, at offset 0.
//
//	off  size  field
//	  0     8  Magic        "NVPHEAP\0"
//	  8     2  Major        format major version; other majors are refused
//	 10     2  Minor        minor version; any minor of our major is readable
//	 12     4  Incompat     incompatible feature flags; unknown bits are refused
//	 16     4  Compat       compatible feature flags; unknown bits are ignored
//	 20     4  HeaderSize   SuperblockSize
//	 24     8  Size         heap size in bytes (the length mapped)
//	 32     8  LogOff       start of the log (one page in)
//	 40     8  LogSize      bytes in the log, header included
//	 48     8  RootsOff     start of the root table (LogOff+LogSize)
//	 56     8  RootsCount   number of root table entries
//	 64     8  AllocOff     start of the allocator metadata
//	 72     8  ArenaOff     start of the arena, page aligned
//	 80     8  ArenaSize    Size-ArenaOff, kept as a cross-check
//	 88    16  UUID         random, tells heaps apart
//	104     8  Created      creation time, Unix nanoseconds
//	112   140  Reserved     must be zero
//	252     4  Checksum     CRC32C (Castagnoli) of bytes 0..251
const (
	sbMagic      = 0
	sbMajor      = 8
	sbMinor      = 10
	sbIncompat   = 12
	sbCompat     = 16
	sbHeaderSize = 20
	sbSize       = 24
	sbLogOff     = 32
	sbLogSize    = 40
	sbRootsOff   = 48
	sbRootsCount = 56
	sbAllocOff   = 64
	sbArenaOff   = 72
	sbArenaSize  = 80
	sbUUID       = 88
	sbCreated    = 104
	sbReserved   = 112
	sbChecksum   = 252

	// knownIncompat holds the incompatible feature bits this reader knows.
	knownIncompat = 0
)

// Log header, at LogOff, one cache line: Reserved, must be zero. (Format 1
// kept the generation of the open transaction here; format 2 finds it in
// the log areas themselves, so a commit needs no header write.)
//
// After the header the log is split into two areas of
// (LogSize-logHeaderSize)/2 bytes (rounded down to 8); a transaction of
// generation g uses area g%2, so the area of the transaction before it,
// whose redo records the next transaction relies on, stays intact. Its
// entries follow one another from the start of the area, each 8-byte
// aligned:
//
//	off  size  field
//	  0     8  Gen       generation of the transaction that wrote it
//	  8     8  Nonce     random, the same in every entry of one attempt at
//	                     a generation: entries left by an earlier attempt
//	                     that was rolled back never pass for this one's
//	 16     8  Off       heap offset of the saved range, cache-line aligned
//	 24     4  Len       bytes of Data, a multiple of the cache line for an
//	                     undo entry
//	 28     4  Checksum  CRC32C of bytes 0..27 and Data
//	 32   Len  Data      undo entry: the bytes at Off before the
//	                     transaction changed them
//
// An undo entry is made durable before the range it saves is modified, so
// an entry that is torn or missing saves a range that was not modified yet,
// and recovery stops at the first such entry. The Gen word of an area's
// first entry (8-byte atomic) tells which transaction last wrote there.
//
// The commit record follows the last undo entry. It has the entry header
// with Off = commitOff and this payload as Data:
//
//	off  size  field
//	  0     8  Undo      number of undo entries before it
//	  8     4  DataSum   CRC32C of the current bytes of the in-place runs
//	 12     4  Reserved  must be zero
//	 16     4  InPlace   number of in-place runs
//	 20     4  Redo      number of redo runs
//	 24  16×i  InPlace   Off (8), Len (8), cache-line aligned: lines written
//	                     in blocks the transaction allocated, made durable
//	                     in place by the commit fence
//	  …        Redo      per run: Off (8), Len (8), cache-line aligned, then
//	                     Len bytes: the new contents of every other line the
//	                     transaction wrote
//
// log.go has the protocol.
const (
	logHeaderSize = 64
	logReserved   = 0

	entGen        = 0
	entNonce      = 8
	entOff        = 16
	entLen        = 24
	entChecksum   = 28
	entHeaderSize = 32

	commitOff  = ^uint64(0)
	crUndo     = 0
	crSum      = 8
	crReserved = 12
	crInPlace  = 16
	crRedo     = 20
	crFixed    = 24
	crRunSize  = 16

	// minRecord is the log space always kept for a commit record without
	// runs, the one a transaction whose full record does not fit writes.
	minRecord = entHeaderSize + crFixed
)

// Root table entry.
//
//	off  size  field
//	  0    32  Name      UTF-8, NUL padded; all zero means the slot is free
//	 32     8  Ptr       payload offset of the root object
//	 40     8  Type      fingerprint of the root's Go type (layout, not names)
//	 48     8  TypeSize  size of that type in bytes
//	 56     4  Checksum  CRC32C of bytes 0..55 (a free slot is all zero)
//	 60     4  Reserved  must be zero
const (
	rootEntrySize = 64
	rootName      = 0
	rootNameMax   = 32
	rootPtr       = 32
	rootType      = 40
	rootTypeSize  = 48
	rootChecksum  = 56
	rootReserved  = 60

	defaultRoots = 128
)

// Allocator metadata, at AllocOff.
//
//	off  size  field
//	   off  size  field
//	     0     8  Top          end of the last block: the arena past it was
//	                           never handed out or was given back (bump
//	                           pointer; no free block ends at Top)
//	     8     8  LastSize     size of the block that ends at Top, 0 if none
//	                           (a block allocated at Top records it as its
//	                           PrevSize)
//	    16     8  LiveBytes    sum of the sizes of allocated blocks
//	    24     8  LiveObjects  number of allocated blocks
//	    32     4  Checksum     CRC32C of bytes 0..31
//	    36    28  Reserved     must be zero
//	    64  8×221 BinHeads     per bin, the first free block (0 = none); see
//	                           binFor in alloc.go for the sizes of each bin
//	  1832   216  Reserved     must be zero
//
// The first cache line is all an allocation or a free changes here besides
// one or two bin heads.
const (
	allocMetaSize = 2048
	amTop         = 0
	amLastSize    = 8
	amLiveBytes   = 16
	amLiveObjects = 24
	amChecksum    = 32
	amReserved    = 36
	amBinHeads    = 64
	numBins       = exactBins + 4*40
	amReserved2   = amBinHeads + 8*numBins
)

// Block header, at a 16-byte aligned arena offset; the payload follows, so
// a Ptr (the payload offset) is 16-byte aligned too. Blocks tile the arena
// from ArenaOff to Top: each starts where the one before it ends.
//
//	off  size  field
//	  0     8  Size      block size, header included: a multiple of 16, at
//	                     least minBlock
//	  8     8  PrevSize  size of the block just before this one, 0 for the
//	                     first block of the arena (free finds its neighbour
//	                     through it)
//	 16     4  Type      tag of the payload's Go type; 0 for raw bytes
//	                     (String, Bytes) and in a free block
//	 20     2  State     blockAlloc or blockFree; anything else is corruption
//	 22     1  Pad       raw block: payload bytes past the data, so the data
//	                     is Size-32-Pad bytes; 0 otherwise
//	 23     1  Reserved  must be zero
//	 24     4  DataSum   raw block: CRC32C of the data; 0 otherwise
//	 28     4  HdrSum    CRC32C of bytes 0..27 and, in a free block, of its
//	                     links (32..47)
//
// A free block keeps its bin's list links in the first payload bytes:
//
//	32     8  Next      next free block of its bin (0 = none)
//	40     8  Prev      previous free block of its bin (0 = the bin head
//	                    points here)
//
// Objects of Go types (Ptr, Slice, Map storage) change in place under the
// log and carry no payload checksum; raw blocks never change once written
// (see "Checks" in the package documentation).
const (
	blockHeaderSize = 32
	bhSize          = 0
	bhPrevSize      = 8
	bhType          = 16
	bhState         = 20
	bhPad           = 22
	bhReserved      = 23
	bhDataSum       = 24
	bhHdrSum        = 28
	bhNext          = 32
	bhPrev          = 40
	freeHeaderSize  = 48 // header and links

	// minBlock is the smallest block: a free block's header and links.
	minBlock = freeHeaderSize

	blockAlloc = 0xA10C
	blockFree  = 0xF4EE
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// superblock is the decoded form of the superblock.
type superblock struct {
	Major, Minor                 uint16
	Incompat, Compat, HeaderSize uint32
	Size                         uint64
	LogOff, LogSize              uint64
	RootsOff, RootsCount         uint64
	AllocOff                     uint64
	ArenaOff, ArenaSize          uint64
	UUID                         [16]byte
	Created                      int64
}

var le = binary.LittleEndian

// layoutFor places the regions of a heap of the given size. The log takes
// a sixteenth of the heap (format 2 took an eighth), between 16 KiB and
// 64 MiB: half of it is the most one transaction saves, and the fresh
// blocks of a transaction, however big, cost its log only a run each, so
// a 64 MiB heap's 2 MiB per transaction holds kv's largest put many times
// over while the arena keeps 93 % of the heap.
func layoutFor(size uint64) superblock {
	logSize := size / 16 &^ (pageSize - 1)
	logSize = min(max(logSize, 16<<10), 64<<20)
	sb := superblock{
		Major: MajorVersion, Minor: MinorVersion, HeaderSize: SuperblockSize,
		Size: size, LogOff: pageSize, LogSize: logSize,
		RootsCount: defaultRoots,
	}
	sb.RootsOff = sb.LogOff + sb.LogSize
	sb.AllocOff = sb.RootsOff + sb.RootsCount*rootEntrySize
	sb.ArenaOff = (sb.AllocOff + allocMetaSize + pageSize - 1) &^ (pageSize - 1)
	sb.ArenaSize = size - sb.ArenaOff
	return sb
}

func (sb *superblock) encode() []byte {
	b := make([]byte, SuperblockSize)
	copy(b[sbMagic:], Magic)
	le.PutUint16(b[sbMajor:], sb.Major)
	le.PutUint16(b[sbMinor:], sb.Minor)
	le.PutUint32(b[sbIncompat:], sb.Incompat)
	le.PutUint32(b[sbCompat:], sb.Compat)
	le.PutUint32(b[sbHeaderSize:], sb.HeaderSize)
	le.PutUint64(b[sbSize:], sb.Size)
	le.PutUint64(b[sbLogOff:], sb.LogOff)
	le.PutUint64(b[sbLogSize:], sb.LogSize)
	le.PutUint64(b[sbRootsOff:], sb.RootsOff)
	le.PutUint64(b[sbRootsCount:], sb.RootsCount)
	le.PutUint64(b[sbAllocOff:], sb.AllocOff)
	le.PutUint64(b[sbArenaOff:], sb.ArenaOff)
	le.PutUint64(b[sbArenaSize:], sb.ArenaSize)
	copy(b[sbUUID:], sb.UUID[:])
	le.PutUint64(b[sbCreated:], uint64(sb.Created))
	le.PutUint32(b[sbChecksum:], crc32.Checksum(b[:sbChecksum], castagnoli))
	return b
}

// decodeSuperblock checks and decodes the first SuperblockSize bytes of b.
// It checks the superblock alone; the caller compares Size with the file.
func decodeSuperblock(b []byte) (superblock, error) {
	var sb superblock
	if len(b) < SuperblockSize {
		return sb, fmt.Errorf("%w: %d bytes, a superblock needs %d", ErrTooSmall, len(b), SuperblockSize)
	}
	if string(b[sbMagic:sbMagic+8]) != Magic {
		return sb, fmt.Errorf("%w: magic is %q, want %q", ErrNotHeap, b[sbMagic:sbMagic+8], Magic)
	}
	sb.Major = le.Uint16(b[sbMajor:])
	sb.Minor = le.Uint16(b[sbMinor:])
	if sb.Major == 1 {
		return sb, fmt.Errorf("%w: format version %d.%d (an undo log without redo commit records), this program reads %d.x: "+
			"open it with a pheap that reads format 1, copy the data out and into a new heap", ErrVersion, sb.Major, sb.Minor, MajorVersion)
	}
	if sb.Major == 2 {
		// Format 3's block headers are twice as long, so every object moves
		// and every reference to it, in objects pheap cannot read the types
		// of, would have to change: no migration in place.
		return sb, fmt.Errorf("%w: format version %d.%d (a size-class allocator without checksums), this program reads %d.x: "+
			"open it with a pheap that reads format 2, copy the data out and into a new heap; "+
			"for kv, whose state can be rebuilt, move the file away and let kv create a new heap", ErrVersion, sb.Major, sb.Minor, MajorVersion)
	}
	if sb.Major != MajorVersion {
		return sb, fmt.Errorf("%w: format version %d.%d, this program reads %d.x", ErrVersion, sb.Major, sb.Minor, MajorVersion)
	}
	if got, want := le.Uint32(b[sbChecksum:]), crc32.Checksum(b[:sbChecksum], castagnoli); got != want {
		return sb, fmt.Errorf("%w: superblock checksum is %#08x, contents give %#08x", ErrChecksum, got, want)
	}
	sb.Incompat = le.Uint32(b[sbIncompat:])
	sb.Compat = le.Uint32(b[sbCompat:])
	if sb.Incompat&^knownIncompat != 0 {
		return sb, fmt.Errorf("%w: unknown incompatible features %#x", ErrVersion, sb.Incompat&^knownIncompat)
	}
	sb.HeaderSize = le.Uint32(b[sbHeaderSize:])
	sb.Size = le.Uint64(b[sbSize:])
	sb.LogOff = le.Uint64(b[sbLogOff:])
	sb.LogSize = le.Uint64(b[sbLogSize:])
	sb.RootsOff = le.Uint64(b[sbRootsOff:])
	sb.RootsCount = le.Uint64(b[sbRootsCount:])
	sb.AllocOff = le.Uint64(b[sbAllocOff:])
	sb.ArenaOff = le.Uint64(b[sbArenaOff:])
	sb.ArenaSize = le.Uint64(b[sbArenaSize:])
	copy(sb.UUID[:], b[sbUUID:])
	sb.Created = int64(le.Uint64(b[sbCreated:]))
	for i, c := range b[sbReserved:sbChecksum] {
		if c != 0 {
			return sb, fmt.Errorf("%w: superblock reserved byte %d is %#x", ErrCorrupt, sbReserved+i, c)
		}
	}
	return sb, sb.check()
}

// check verifies that the regions are where this version puts them. Every
// sum is bounded first so no overflow can make a bad layout look good.
func (sb *superblock) check() error {
	bad := func(what string, args ...any) error {
		return fmt.Errorf("%w: superblock: %s", ErrCorrupt, fmt.Sprintf(what, args...))
	}
	const maxSize = 1 << 50
	switch {
	case sb.HeaderSize != SuperblockSize:
		return bad("header size %d, want %d", sb.HeaderSize, SuperblockSize)
	case sb.Size < MinSize || sb.Size > maxSize || sb.Size%pageSize != 0:
		return bad("heap size %d is not a page multiple in [%d, %d]", sb.Size, MinSize, uint64(maxSize))
	case sb.LogOff != pageSize:
		return bad("log at %d, want %d", sb.LogOff, pageSize)
	case sb.LogSize < 2*pageSize || sb.LogSize > sb.Size || sb.LogSize%pageSize != 0:
		return bad("log size %d", sb.LogSize)
	case sb.RootsOff != sb.LogOff+sb.LogSize:
		return bad("root table at %d, want %d", sb.RootsOff, sb.LogOff+sb.LogSize)
	case sb.RootsCount == 0 || sb.RootsCount > 1<<16:
		return bad("%d roots", sb.RootsCount)
	case sb.AllocOff != sb.RootsOff+sb.RootsCount*rootEntrySize:
		return bad("allocator metadata at %d, want %d", sb.AllocOff, sb.RootsOff+sb.RootsCount*rootEntrySize)
	case sb.ArenaOff%pageSize != 0 || sb.ArenaOff < sb.AllocOff+allocMetaSize || sb.ArenaOff >= sb.Size:
		return bad("arena at %d", sb.ArenaOff)
	case sb.ArenaSize != sb.Size-sb.ArenaOff:
		return bad("arena size %d, want %d", sb.ArenaSize, sb.Size-sb.ArenaOff)
	}
	return nil
}
