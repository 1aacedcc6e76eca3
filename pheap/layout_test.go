package pheap

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"unsafe"
)

// TestLayoutFrozen pins every offset and size of the on-media format. If it
// fails, the format changed: bump MajorVersion (or add a flag) on purpose
// and update this table, never just the numbers.
func TestLayoutFrozen(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"Magic len", len(Magic), 8},
		{"MajorVersion", MajorVersion, 3},
		{"SuperblockSize", SuperblockSize, 256},
		{"MinSize", MinSize, 65536},
		{"sbMagic", sbMagic, 0}, {"sbMajor", sbMajor, 8}, {"sbMinor", sbMinor, 10},
		{"sbIncompat", sbIncompat, 12}, {"sbCompat", sbCompat, 16}, {"sbHeaderSize", sbHeaderSize, 20},
		{"sbSize", sbSize, 24}, {"sbLogOff", sbLogOff, 32}, {"sbLogSize", sbLogSize, 40},
		{"sbRootsOff", sbRootsOff, 48}, {"sbRootsCount", sbRootsCount, 56}, {"sbAllocOff", sbAllocOff, 64},
		{"sbArenaOff", sbArenaOff, 72}, {"sbArenaSize", sbArenaSize, 80}, {"sbUUID", sbUUID, 88},
		{"sbCreated", sbCreated, 104}, {"sbReserved", sbReserved, 112}, {"sbChecksum", sbChecksum, 252},
		{"logHeaderSize", logHeaderSize, 64}, {"logReserved", logReserved, 0},
		{"entGen", entGen, 0}, {"entNonce", entNonce, 8}, {"entOff", entOff, 16}, {"entLen", entLen, 24},
		{"entChecksum", entChecksum, 28}, {"entHeaderSize", entHeaderSize, 32},
		{"commitOff>>1", int(commitOff >> 1), int(^uint64(0) >> 1)}, {"crUndo", crUndo, 0}, {"crSum", crSum, 8},
		{"crReserved", crReserved, 12}, {"crInPlace", crInPlace, 16}, {"crRedo", crRedo, 20},
		{"crFixed", crFixed, 24}, {"crRunSize", crRunSize, 16}, {"minRecord", minRecord, 56},
		{"rootEntrySize", rootEntrySize, 64}, {"rootName", rootName, 0}, {"rootNameMax", rootNameMax, 32},
		{"rootPtr", rootPtr, 32}, {"rootType", rootType, 40}, {"rootTypeSize", rootTypeSize, 48},
		{"rootChecksum", rootChecksum, 56}, {"rootReserved", rootReserved, 60}, {"defaultRoots", defaultRoots, 128},
		{"allocMetaSize", allocMetaSize, 2048}, {"amTop", amTop, 0}, {"amLastSize", amLastSize, 8},
		{"amLiveBytes", amLiveBytes, 16}, {"amLiveObjects", amLiveObjects, 24}, {"amChecksum", amChecksum, 32},
		{"amReserved", amReserved, 36}, {"amBinHeads", amBinHeads, 64},
		{"numBins", numBins, 221}, {"exactBins", exactBins, 61}, {"amReserved2", amReserved2, 1832},
		{"blockHeaderSize", blockHeaderSize, 32}, {"bhSize", bhSize, 0}, {"bhPrevSize", bhPrevSize, 8},
		{"bhType", bhType, 16}, {"bhState", bhState, 20}, {"bhPad", bhPad, 22}, {"bhReserved", bhReserved, 23},
		{"bhDataSum", bhDataSum, 24}, {"bhHdrSum", bhHdrSum, 28}, {"bhNext", bhNext, 32}, {"bhPrev", bhPrev, 40},
		{"freeHeaderSize", freeHeaderSize, 48}, {"minBlock", minBlock, 48},
		{"blockAlloc", blockAlloc, 0xA10C}, {"blockFree", blockFree, 0xF4EE},
		// The bins are format too: a block is filed under binFor(size).
		{"bin of 48", binFor(48), 0}, {"bin of 1008", binFor(1008), 60}, {"bin of 1024", binFor(1024), 61},
		{"bin of 1279", binFor(1279), 61}, {"bin of 1280", binFor(1280), 62}, {"bin of 2047", binFor(2047), 64},
		{"bin of 2048", binFor(2048), 65}, {"bin of 1 MiB + 32", binFor(1<<20 + 32), 101},
		{"bin of 2^50-16", binFor(1<<50 - 16), 220},
		// Persistent reference types are part of user objects' layout.
		{"Ptr size", int(unsafe.Sizeof(Ptr[int64]{})), 8},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, frozen at %d", c.name, c.got, c.want)
		}
	}
}

// TestSuperblockEncoding writes distinct values and reads them back at the
// documented offsets with plain binary reads.
func TestSuperblockEncoding(t *testing.T) {
	sb := layoutFor(1 << 20)
	sb.Compat = 0x01020304
	sb.Created = 0x1122334455667788
	for i := range sb.UUID {
		sb.UUID[i] = byte(i + 1)
	}
	b := sb.encode()
	le := binary.LittleEndian
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"magic", le.Uint64(b[0:]), le.Uint64([]byte(Magic))},
		{"major", uint64(le.Uint16(b[8:])), 3},
		{"minor", uint64(le.Uint16(b[10:])), 0},
		{"incompat", uint64(le.Uint32(b[12:])), 0},
		{"compat", uint64(le.Uint32(b[16:])), 0x01020304},
		{"header size", uint64(le.Uint32(b[20:])), 256},
		{"size", le.Uint64(b[24:]), 1 << 20},
		{"log off", le.Uint64(b[32:]), 4096},
		{"log size", le.Uint64(b[40:]), 64 << 10},
		{"roots off", le.Uint64(b[48:]), 4096 + 64<<10},
		{"roots count", le.Uint64(b[56:]), 128},
		{"alloc off", le.Uint64(b[64:]), 4096 + 64<<10 + 128*64},
		{"arena off", le.Uint64(b[72:]), 4096 + 64<<10 + 3*4096},
		{"arena size", le.Uint64(b[80:]), 1<<20 - (4096 + 64<<10 + 3*4096)},
		{"uuid", uint64(b[88]) | uint64(b[103])<<8, 1 | 16<<8},
		{"created", le.Uint64(b[104:]), 0x1122334455667788},
		{"checksum", uint64(le.Uint32(b[252:])), uint64(crc32.Checksum(b[:252], crc32.MakeTable(crc32.Castagnoli)))},
	} {
		if c.got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, c.got, c.want)
		}
	}
	back, err := decodeSuperblock(b)
	if err != nil || back != sb {
		t.Fatalf("decode: %+v, %v", back, err)
	}
}
