package kernel

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// UncompressedFile is the name of the uncompressed kernel (a PVH vmlinux)
// that kernel-config/build.sh puts beside the bzImage.
const UncompressedFile = "vmlinux"

// Uncompressed is the PVH vmlinux built with the bzImage at bzImage, if
// there is one beside it ("" and no error when there is none: a kernel
// from elsewhere may come without it). One that is there but not a PVH
// ELF is an error.
func Uncompressed(bzImage string) (string, error) {
	p := filepath.Join(filepath.Dir(bzImage), UncompressedFile)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if _, err := PVHEntry(p); err != nil {
		return "", err
	}
	return p, nil
}

// xenElfnotePhys32Entry is the ELF note (owner "Xen") that gives a
// kernel's 32-bit PVH entry point, a physical address: the x86/HVM direct
// boot ABI that QEMU's -kernel, Firecracker and cloud-hypervisor follow.
const xenElfnotePhys32Entry = 18

// PVHEntry reads the PVH entry point of the vmlinux at path and returns
// its offset in the file. The error names path and what is missing.
func PVHEntry(path string) (fileOffset int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return PVHEntryIn(f, path)
}

// PVHEntryIn is PVHEntry of a vmlinux read through r; name is what errors
// call it.
func PVHEntryIn(r io.ReaderAt, name string) (fileOffset int64, err error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return 0, fmt.Errorf("%s: not an ELF kernel: %w", name, err)
	}
	if f.Machine != elf.EM_X86_64 {
		return 0, fmt.Errorf("%s: an ELF for %s, not x86-64", name, f.Machine)
	}
	entry, ok := uint64(0), false
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return 0, fmt.Errorf("%s: reading its notes: %w", name, err)
		}
		if entry, ok = findNote(b, "Xen", xenElfnotePhys32Entry); ok {
			break
		}
	}
	if !ok {
		return 0, fmt.Errorf("%s: no PVH entry note (Xen note %d): a kernel built without CONFIG_PVH", name, xenElfnotePhys32Entry)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && entry >= p.Paddr && entry < p.Paddr+p.Filesz {
			return int64(p.Off + entry - p.Paddr), nil
		}
	}
	return 0, fmt.Errorf("%s: PVH entry %#x is in no loaded segment", name, entry)
}

// findNote returns the value (4 or 8 bytes, little-endian) of the note
// named name with type typ in a PT_NOTE segment's bytes.
func findNote(b []byte, name string, typ uint32) (uint64, bool) {
	for len(b) >= 12 {
		nsz, dsz, t := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])
		nEnd := 12 + (uint64(nsz)+3)&^3
		dEnd := nEnd + (uint64(dsz)+3)&^3
		if dEnd > uint64(len(b)) {
			return 0, false
		}
		n := bytes.TrimRight(b[12:12+nsz], "\x00")
		if t == typ && string(n) == name {
			d := b[nEnd : nEnd+uint64(dsz)]
			switch dsz {
			case 4:
				return uint64(binary.LittleEndian.Uint32(d)), true
			case 8:
				return binary.LittleEndian.Uint64(d), true
			}
			return 0, false
		}
		b = b[dEnd:]
	}
	return 0, false
}
