package mbr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Table is a disk's MBR partition table as Read found it.
type Table struct {
	Disk uint32 // the disk identifier (bytes 440-443)
	// Partitions are the primary and logical partitions, by Number; the
	// extended partition is Extended.
	Partitions []Layout
	// Extended is the extended partition; nil: none.
	Extended *Layout
}

// Part returns the partition numbered n, or nil.
func (t *Table) Part(n int) *Layout {
	for i := range t.Partitions {
		if t.Partitions[i].Number == n {
			return &t.Partitions[i]
		}
	}
	return nil
}

// Bytes is where the table's last partition ends: the smallest disk that
// holds them all.
func (t *Table) Bytes() int64 {
	end := int64(0)
	for _, l := range t.Partitions {
		end = max(end, (l.Last+1)*sector)
	}
	if t.Extended != nil {
		end = max(end, (t.Extended.Last+1)*sector)
	}
	return end
}

// Read reads the MBR of the disk r and the EBR chain of its extended
// partition, and checks them: the boot signatures, every partition after
// the MBR with a length, no two primary partitions overlapping, every
// logical partition inside the extended one after its EBR, each EBR
// after the one before (so the chain ends). A GPT disk (its protective
// MBR) is refused, saying so.
func Read(r io.ReaderAt) (*Table, error) {
	head := make([]byte, sector)
	if _, err := r.ReadAt(head, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("mbr: shorter than one sector: no partition table")
		}
		return nil, fmt.Errorf("mbr: %w", err)
	}
	if head[510] != 0x55 || head[511] != 0xAA {
		return nil, errors.New("mbr: no boot signature (55 AA) at byte 510: no partition table")
	}
	t := &Table{Disk: binary.LittleEndian.Uint32(head[440:])}
	for i := range 4 {
		e := head[446+16*i:]
		typ, start, n := e[4], int64(binary.LittleEndian.Uint32(e[8:])), int64(binary.LittleEndian.Uint32(e[12:]))
		if typ == 0 {
			continue
		}
		if typ == typeProtective {
			return nil, errors.New("mbr: a GPT disk's protective MBR (type EE): read it as GPT")
		}
		if start == 0 || n == 0 {
			return nil, fmt.Errorf("mbr: partition %d (type %#02x) starts at LBA %d, %d sectors: not a partition", i+1, typ, start, n)
		}
		l := Layout{Name: fmt.Sprint(i + 1), Type: typ, Number: i + 1, First: start, Last: start + n - 1}
		for _, o := range append(slices.Clone(t.Partitions), extended(t)...) {
			if l.First <= o.Last && o.First <= l.Last {
				return nil, fmt.Errorf("mbr: partition %d (LBAs %d-%d) overlaps partition %d (LBAs %d-%d)", l.Number, l.First, l.Last, o.Number, o.First, o.Last)
			}
		}
		if isExtended(typ) {
			if t.Extended != nil {
				return nil, fmt.Errorf("mbr: partitions %d and %d are both extended", t.Extended.Number, l.Number)
			}
			t.Extended = &l
			continue
		}
		t.Partitions = append(t.Partitions, l)
	}
	if t.Extended != nil {
		if err := t.readLogical(r); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// extended is the extended partition as a list of zero or one.
func extended(t *Table) []Layout {
	if t.Extended == nil {
		return nil
	}
	return []Layout{*t.Extended}
}

// readLogical follows the EBR chain of t's extended partition.
func (t *Table) readLogical(r io.ReaderAt) error {
	ext := *t.Extended
	at := ext.First
	ebr := make([]byte, sector)
	for n := 5; ; n++ {
		if n-5 == maxLogical {
			return fmt.Errorf("mbr: more than %d logical partitions", maxLogical)
		}
		if _, err := r.ReadAt(ebr, at*sector); err != nil {
			return fmt.Errorf("mbr: the EBR of partition %d at LBA %d: %w", n, at, err)
		}
		if ebr[510] != 0x55 || ebr[511] != 0xAA {
			return fmt.Errorf("mbr: the EBR of partition %d at LBA %d has no boot signature", n, at)
		}
		e := ebr[446:]
		typ, rel, size := e[4], int64(binary.LittleEndian.Uint32(e[8:])), int64(binary.LittleEndian.Uint32(e[12:]))
		if typ != 0 {
			l := Layout{Name: fmt.Sprint(n), Type: typ, Number: n, First: at + rel, Last: at + rel + size - 1}
			if rel == 0 || size == 0 || l.Last > ext.Last || isExtended(typ) {
				return fmt.Errorf("mbr: logical partition %d (type %#02x, LBAs %d-%d) is not inside the extended partition (LBAs %d-%d) after its EBR at %d",
					n, typ, l.First, l.Last, ext.First, ext.Last, at)
			}
			t.Partitions = append(t.Partitions, l)
		}
		link := ebr[462:]
		ltyp, lrel := link[4], int64(binary.LittleEndian.Uint32(link[8:]))
		if ltyp == 0 {
			return nil
		}
		next := ext.First + lrel
		if !isExtended(ltyp) || next <= at || next > ext.Last {
			return fmt.Errorf("mbr: the EBR at LBA %d links to LBA %d (type %#02x): not a later EBR inside the extended partition (LBAs %d-%d)",
				at, next, ltyp, ext.First, ext.Last)
		}
		if typ != 0 && next <= t.Partitions[len(t.Partitions)-1].Last {
			return fmt.Errorf("mbr: the EBR at LBA %d is inside logical partition %d", next, n)
		}
		at = next
	}
}
