package pheap

import (
	"fmt"
	"hash/crc32"
	"math/bits"

	"github.com/nvboot/nvboot/internal/pheapchecksums"
)

// Block headers, bins and the allocator's counters: their byte formats are
// in layout.go, the allocator that changes them in alloc.go.

// The checksums stored in the heap's writable part (block headers, raw
// data, allocator counters, root entries) are CRC-32C, masked as LevelDB
// and the Snappy framing format mask theirs. The log's checksums, which
// tell a torn record or in-place run from a whole one, are plain CRC-32C
// over bytes that include these; and a plain CRC-32C stored right after
// the bytes it covers turns them into a codeword, whose changes a CRC-32C
// over a larger span cannot see: a torn copy of the counters' line in a
// commit record passed for whole (the crash simulator found it). The mask
// (a rotation and an addition) is not linear, so the two checksums stay
// independent.
func mask(crc uint32) uint32 { return (crc>>15 | crc<<17) + 0xa282ead8 }

// storedSum is the masked CRC-32C of b.
func storedSum(b []byte) uint32 { return mask(crc32.Checksum(b, castagnoli)) }

// blockHdr is a decoded block header, with the links of a free block.
type blockHdr struct {
	off            uint64 // where the header is
	size, prevSize uint64
	typ            uint32
	state          uint16
	pad            uint8
	dataSum        uint32
	next, prev     uint64 // free block only
}

func (b *blockHdr) free() bool { return b.state == blockFree }

// end is the offset just past the block.
func (b *blockHdr) end() uint64 { return b.off + b.size }

// hdrSum is the header checksum of the encoded header e: bytes 0..27, and a
// free block's links.
func hdrSum(e []byte, free bool) uint32 {
	sum := crc32.Checksum(e[:bhHdrSum], castagnoli)
	if free {
		sum = crc32.Update(sum, castagnoli, e[bhNext:freeHeaderSize])
	}
	return mask(sum)
}

// encode writes the header, and a free block's links, to e (32 or 48
// bytes).
func (b *blockHdr) encode(e []byte) {
	le.PutUint64(e[bhSize:], b.size)
	le.PutUint64(e[bhPrevSize:], b.prevSize)
	le.PutUint32(e[bhType:], b.typ)
	le.PutUint16(e[bhState:], b.state)
	e[bhPad] = b.pad
	e[bhReserved] = 0
	le.PutUint32(e[bhDataSum:], b.dataSum)
	if b.free() {
		le.PutUint64(e[bhNext:], b.next)
		le.PutUint64(e[bhPrev:], b.prev)
	}
	le.PutUint32(e[bhHdrSum:], hdrSum(e, b.free()))
}

// stateName names a block state in messages.
func stateName(s uint16) string {
	switch s {
	case blockAlloc:
		return "allocated"
	case blockFree:
		return "free"
	}
	return fmt.Sprintf("state %#x", s)
}

// readHdr decodes and checks the block header at off: inside the arena up
// to top, its checksum, a known state, a size that fits, and the fields
// its state leaves zero. The error wraps kind: ErrBadPtr where off comes
// from a reference (it may point at no block as well as at a damaged
// one), ErrCorrupt where it comes from the heap's own metadata; and
// ErrChecksum if the checksum does not match.
func (h *Heap) readHdr(off, top uint64, kind error) (blockHdr, error) {
	b := blockHdr{off: off}
	if off < h.sb.ArenaOff || off%16 != 0 || off >= top || top-off < minBlock {
		return b, fmt.Errorf("%w: no block at %d", kind, off)
	}
	e := h.b[off : off+freeHeaderSize]
	b.size, b.prevSize = le.Uint64(e[bhSize:]), le.Uint64(e[bhPrevSize:])
	b.typ, b.state, b.pad = le.Uint32(e[bhType:]), le.Uint16(e[bhState:]), e[bhPad]
	b.dataSum = le.Uint32(e[bhDataSum:])
	if b.state != blockAlloc && b.state != blockFree {
		return b, fmt.Errorf("%w: no block at %d (%s)", kind, off, stateName(b.state))
	}
	if !pheapchecksums.NoChecksums.Load() {
		if got, want := le.Uint32(e[bhHdrSum:]), hdrSum(e, b.free()); got != want {
			return b, fmt.Errorf("%w: block header at %d: %w: stored %#08x, the header gives %#08x", kind, off, ErrChecksum, got, want)
		}
	}
	if b.free() {
		b.next, b.prev = le.Uint64(e[bhNext:]), le.Uint64(e[bhPrev:])
	}
	bad := ""
	switch {
	case b.size%16 != 0 || b.size < minBlock || b.size > top-off:
		bad = fmt.Sprintf("size %d", b.size)
	case b.prevSize%16 != 0 || b.prevSize > off-h.sb.ArenaOff || (b.prevSize == 0) != (off == h.sb.ArenaOff) || (b.prevSize != 0 && b.prevSize < minBlock):
		bad = fmt.Sprintf("previous block size %d", b.prevSize)
	case e[bhReserved] != 0:
		bad = "reserved byte not zero"
	case b.free() && (b.typ != 0 || b.pad != 0 || b.dataSum != 0):
		bad = "free block with a type, pad or data checksum"
	case b.state == blockAlloc && b.typ != 0 && (b.pad != 0 || b.dataSum != 0):
		bad = "typed block with a pad or data checksum"
	case b.state == blockAlloc && b.typ == 0 && uint64(b.pad) >= b.size-blockHeaderSize:
		bad = fmt.Sprintf("raw block of %d bytes with pad %d", b.size, b.pad)
	}
	if bad != "" {
		return b, fmt.Errorf("%w: block header at %d: %s", kind, off, bad)
	}
	return b, nil
}

// Bins: free blocks of one size range share a list. Blocks under 1 KiB
// have a bin per size (48, 64, ... 1008 bytes: every block in the bin
// fits a request of its size); from 1 KiB on, each power of two is split
// into four bins ([1024, 1280), [1280, 1536), ...), up to 2^50, the
// largest heap.
const exactBins = (1024 - minBlock) / 16

// binFor returns the bin of a free block of the given size.
func binFor(size uint64) int {
	if size < 1024 {
		return int((size - minBlock) / 16)
	}
	lg := bits.Len64(size) - 1
	i := exactBins + (lg-10)*4 + int(size>>(lg-2)&3)
	return min(i, numBins-1)
}

// binCache is a bitmap of the bins that have a block, derived from the
// heads and rebuilt from them when not valid. Only write transactions use
// it (Views run concurrently and must not rebuild it).
type binCache struct {
	valid bool
	bits  [(numBins + 63) / 64]uint64
}

// binBits returns the cache, rebuilding it first if needed.
func (h *Heap) binBits() *binCache {
	c := &h.bins
	if !c.valid {
		clear(c.bits[:])
		for i := range numBins {
			if h.u64(h.binHead(i)) != 0 {
				c.bits[i/64] |= 1 << (i % 64)
			}
		}
		c.valid = true
	}
	return c
}

// set records whether bin i has a block.
func (c *binCache) set(i int, has bool) {
	if has {
		c.bits[i/64] |= 1 << (i % 64)
	} else {
		c.bits[i/64] &^= 1 << (i % 64)
	}
}

// next returns the first bin from i on that has a block, or -1.
func (c *binCache) next(i int) int {
	for w := i / 64; w < len(c.bits); w++ {
		b := c.bits[w]
		if w == i/64 {
			b &^= 1<<(i%64) - 1
		}
		if b != 0 {
			return w*64 + bits.TrailingZeros64(b)
		}
	}
	return -1
}

// binHead returns the offset of bin i's head word.
func (h *Heap) binHead(i int) uint64 { return h.sb.AllocOff + amBinHeads + 8*uint64(i) }

// allocMeta is the decoded first line of the allocator metadata.
type allocMeta struct {
	top, lastSize, liveBytes, liveObjects uint64
}

func decodeMeta(am []byte) allocMeta {
	return allocMeta{le.Uint64(am[amTop:]), le.Uint64(am[amLastSize:]), le.Uint64(am[amLiveBytes:]), le.Uint64(am[amLiveObjects:])}
}

func (m allocMeta) encode(am []byte) {
	le.PutUint64(am[amTop:], m.top)
	le.PutUint64(am[amLastSize:], m.lastSize)
	le.PutUint64(am[amLiveBytes:], m.liveBytes)
	le.PutUint64(am[amLiveObjects:], m.liveObjects)
	le.PutUint32(am[amChecksum:], storedSum(am[:amChecksum]))
}

// meta returns the allocator counters.
func (h *Heap) meta() allocMeta { return decodeMeta(h.b[h.sb.AllocOff:]) }

func (h *Heap) top() uint64 { return h.u64(h.sb.AllocOff + amTop) }
