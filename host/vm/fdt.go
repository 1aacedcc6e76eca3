package vm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// A flattened device tree (the Devicetree Specification, chapter 5): a
// 40-byte header, the memory reservation block, the structure block (a
// stream of big-endian tokens) and the strings block (property names).
// fdtAddPmem edits QEMU's tree in the one way the arm64 board needs.
const (
	fdtMagic     = 0xd00dfeed
	fdtHeaderLen = 40

	fdtBeginNode = 1
	fdtEndNode   = 2
	fdtProp      = 3
	fdtNop       = 4
	fdtEnd       = 9
)

// fdtAddPmem returns dtb with a node for each region added under the root:
// pmem@ADDR, compatible "pmem-region" (Linux's of_pmem binding), reg the
// region's address and size in the root's two-cell format (QEMU's virt
// machine uses two cells for both). A malformed tree, or one whose root
// does not use two cells, is refused.
func fdtAddPmem(dtb []byte, regions []pmemRegion) ([]byte, error) {
	if len(dtb) < fdtHeaderLen {
		return nil, fmt.Errorf("device tree of %d bytes: shorter than its header", len(dtb))
	}
	h := func(i int) uint32 { return binary.BigEndian.Uint32(dtb[4*i:]) }
	magic, total, offStruct, offStrings, offRsv, version := h(0), h(1), h(2), h(3), h(4), h(5)
	sizeStrings, sizeStruct := h(8), h(9)
	switch {
	case magic != fdtMagic:
		return nil, fmt.Errorf("not a device tree (magic %#x, want %#x)", magic, fdtMagic)
	case version < 17:
		return nil, fmt.Errorf("device tree version %d: want 17", version)
	case uint64(total) > uint64(len(dtb)),
		offRsv < fdtHeaderLen || offRsv > offStruct,
		uint64(offStruct)+uint64(sizeStruct) > uint64(offStrings),
		uint64(offStrings)+uint64(sizeStrings) > uint64(total):
		return nil, errors.New("device tree blocks out of order or past its end")
	}
	st := dtb[offStruct : offStruct+sizeStruct]
	strs := dtb[offStrings : offStrings+sizeStrings]
	rootEnd, cells, err := fdtRoot(st, strs)
	if err != nil {
		return nil, err
	}
	if cells != [2]uint32{2, 2} {
		return nil, fmt.Errorf("device tree root with #address-cells %d and #size-cells %d: want 2 and 2", cells[0], cells[1])
	}
	newStrs := append([]byte(nil), strs...)
	nameOff := func(name string) uint32 {
		if i := fdtFindString(newStrs, name); i >= 0 {
			return uint32(i)
		}
		off := len(newStrs)
		newStrs = append(append(newStrs, name...), 0)
		return uint32(off)
	}
	var nodes []byte
	be := binary.BigEndian
	for _, r := range regions {
		nodes = be.AppendUint32(nodes, fdtBeginNode)
		nodes = fdtPad(append(nodes, fmt.Sprintf("pmem@%x\x00", r.addr)...))
		compat := []byte("pmem-region\x00")
		nodes = be.AppendUint32(nodes, fdtProp)
		nodes = be.AppendUint32(nodes, uint32(len(compat)))
		nodes = be.AppendUint32(nodes, nameOff("compatible"))
		nodes = fdtPad(append(nodes, compat...))
		nodes = be.AppendUint32(nodes, fdtProp)
		nodes = be.AppendUint32(nodes, 16)
		nodes = be.AppendUint32(nodes, nameOff("reg"))
		nodes = be.AppendUint64(nodes, r.addr)
		nodes = be.AppendUint64(nodes, r.size)
		nodes = be.AppendUint32(nodes, fdtEndNode)
	}
	var out bytes.Buffer
	out.Write(dtb[:offStruct]) // header and reservations, patched below
	out.Write(st[:rootEnd])
	out.Write(nodes)
	out.Write(st[rootEnd:])
	newOffStrings := out.Len()
	out.Write(newStrs)
	b := out.Bytes()
	be.PutUint32(b[4:], uint32(len(b)))
	be.PutUint32(b[12:], uint32(newOffStrings))
	be.PutUint32(b[32:], uint32(len(newStrs)))
	be.PutUint32(b[36:], uint32(len(st)+len(nodes)))
	return b, nil
}

// fdtRoot walks the structure block st and returns the offset of the
// root node's END_NODE token and the root's #address-cells and
// #size-cells.
func fdtRoot(st, strs []byte) (rootEnd int, cells [2]uint32, err error) {
	bad := func(what string, at int) (int, [2]uint32, error) {
		return 0, cells, fmt.Errorf("device tree structure block: %s at offset %d", what, at)
	}
	depth := 0
	for i := 0; ; {
		if i+4 > len(st) {
			return bad("no FDT_END", i)
		}
		tok := binary.BigEndian.Uint32(st[i:])
		at := i
		i += 4
		switch tok {
		case fdtBeginNode:
			n := bytes.IndexByte(st[i:], 0)
			if n < 0 {
				return bad("unterminated node name", i)
			}
			if depth == 0 && (at != 0 || n != 0) {
				return bad("a root that is not the first, unnamed node", at)
			}
			i = fdtAlign(i + n + 1)
			depth++
		case fdtEndNode:
			depth--
			if depth < 0 {
				return bad("END_NODE without a node", at)
			}
			if depth == 0 {
				return at, cells, nil
			}
		case fdtProp:
			if i+8 > len(st) {
				return bad("cut-short property", at)
			}
			ln, nameOff := binary.BigEndian.Uint32(st[i:]), binary.BigEndian.Uint32(st[i+4:])
			i += 8
			if uint64(i)+uint64(ln) > uint64(len(st)) {
				return bad("property past the block's end", at)
			}
			if depth == 1 && ln == 4 {
				switch fdtString(strs, nameOff) {
				case "#address-cells":
					cells[0] = binary.BigEndian.Uint32(st[i:])
				case "#size-cells":
					cells[1] = binary.BigEndian.Uint32(st[i:])
				}
			}
			i = fdtAlign(i + int(ln))
		case fdtNop:
		default:
			return bad(fmt.Sprintf("token %#x", tok), at)
		}
	}
}

// fdtString is the NUL-terminated string at off in the strings block.
func fdtString(strs []byte, off uint32) string {
	if uint64(off) >= uint64(len(strs)) {
		return ""
	}
	s := strs[off:]
	if n := bytes.IndexByte(s, 0); n >= 0 {
		return string(s[:n])
	}
	return ""
}

// fdtFindString is the offset of name as a whole string in the strings
// block, or -1.
func fdtFindString(strs []byte, name string) int {
	for off := 0; off < len(strs); {
		n := bytes.IndexByte(strs[off:], 0)
		if n < 0 {
			return -1
		}
		if string(strs[off:off+n]) == name {
			return off
		}
		off += n + 1
	}
	return -1
}

func fdtAlign(i int) int { return (i + 3) &^ 3 }

func fdtPad(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
