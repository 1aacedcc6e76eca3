package tryboot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Name is the file the Pi firmware reads from the card's first FAT
// partition before it picks the partition to boot.
const Name = "autoboot.txt"

// MaxBytes is the largest autoboot.txt the firmware reads.
const MaxBytes = 512

// Autoboot is what an autoboot.txt says: the partition a boot starts, with
// and without the tryboot flag.
type Autoboot struct {
	// Boot is the partition every boot without the tryboot flag starts
	// (boot_partition under [all]): the committed slot's.
	Boot int
	// TryBoot is the partition a boot with the tryboot flag starts
	// (boot_partition under [tryboot]): the slot on trial. The flag is
	// one-shot, so the boot after it starts Boot again.
	TryBoot int
	// AB is tryboot_a_b=1: with the flag set the firmware reads the
	// tried partition's config.txt as it is, not tryboot.txt, so each
	// slot's boot partition holds what a normal boot of it reads.
	AB bool
}

// Marshal is a as the file nvboot writes: [all] with tryboot_a_b and
// boot_partition, then [tryboot] with its boot_partition. For
// single-digit partitions its length does not depend on them, so a commit
// rewrites the file in place (Write).
func (a Autoboot) Marshal() []byte {
	ab := 0
	if a.AB {
		ab = 1
	}
	return fmt.Appendf(nil, "[all]\ntryboot_a_b=%d\nboot_partition=%d\n[tryboot]\nboot_partition=%d\n", ab, a.Boot, a.TryBoot)
}

// Parse reads an autoboot.txt as the firmware does: lines of key=value
// under conditional sections, a later value winning, [all] applying to
// every boot, [tryboot] only to a boot with the flag, [none] to none;
// before any section, lines apply to every boot. Comments (#) and blank
// lines are skipped. Anything the firmware's autoboot.txt does not take (a
// file over 512 bytes, another section filter, another key, a value that
// is not a partition number) is an error naming the line: a file nvboot
// would rewrite must say only what nvboot understands. Boot and TryBoot
// are 0 when the file sets none.
func Parse(b []byte) (Autoboot, error) {
	if len(b) > MaxBytes {
		return Autoboot{}, fmt.Errorf("%s: %d bytes: the firmware reads at most %d", Name, len(b), MaxBytes)
	}
	var a Autoboot
	normal, tried := true, true // which boots the current section applies to
	for i, line := range strings.Split(string(b), "\n") {
		at := fmt.Sprintf("%s line %d", Name, i+1)
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			switch line {
			case "[all]":
				normal, tried = true, true
			case "[none]":
				normal, tried = false, false
			case "[tryboot]":
				normal, tried = false, true
			default:
				return Autoboot{}, fmt.Errorf("%s: section %q: autoboot.txt takes [all], [none] and [tryboot]", at, line)
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return Autoboot{}, fmt.Errorf("%s: %q is not key=value", at, line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		n, err := strconv.Atoi(v)
		switch {
		case k == "boot_partition" && (err != nil || n < 0 || n > 63):
			return Autoboot{}, fmt.Errorf("%s: boot_partition=%q: want a partition number, 0 to 63", at, v)
		case k == "tryboot_a_b" && (err != nil || n < 0 || n > 1):
			return Autoboot{}, fmt.Errorf("%s: tryboot_a_b=%q: want 0 or 1", at, v)
		case k == "boot_partition":
			if normal {
				a.Boot = n
			}
			if tried {
				a.TryBoot = n
			}
		case k == "tryboot_a_b":
			// It changes what a boot with the flag reads: its view counts.
			if tried {
				a.AB = n == 1
			}
		default:
			return Autoboot{}, fmt.Errorf("%s: key %q: autoboot.txt takes boot_partition and tryboot_a_b", at, k)
		}
	}
	return a, nil
}

// Read finds autoboot.txt in the root directory of the FAT filesystem r
// and parses it, returning where it is too.
func Read(r io.ReaderAt) (Autoboot, File, error) {
	f, err := Locate(r, Name)
	if err != nil {
		return Autoboot{}, File{}, err
	}
	b := make([]byte, f.Size)
	if _, err := r.ReadAt(b, f.Offset); err != nil {
		return Autoboot{}, File{}, fmt.Errorf("reading %s at byte %d: %w", Name, f.Offset, err)
	}
	a, err := Parse(b)
	return a, f, err
}

// ReadWriterAt is a FAT filesystem that can be written in place: the
// card's first partition, or an image of it.
type ReadWriterAt interface {
	io.ReaderAt
	io.WriterAt
}

// ErrLength is returned by Write when the new autoboot.txt is not as long
// as the one on the filesystem.
var ErrLength = errors.New("the new autoboot.txt is not as long as the old one")

// Write replaces the autoboot.txt in the root directory of the FAT
// filesystem fs by a's, in place: the same bytes of the same file, whose
// length, directory entry and allocation stay as they are, so the change is
// one write within one sector (a file of at most 512 bytes starts a
// cluster). A power cut leaves the old file or the new one, as far as the
// card writes a sector whole. The file there must parse, and a's must be
// as long (ErrLength). It returns what the file said before; the caller
// makes the write durable (fsync) and reads it back.
func Write(fs ReadWriterAt, a Autoboot) (Autoboot, error) {
	old, f, err := Read(fs)
	if err != nil {
		return Autoboot{}, err
	}
	b := a.Marshal()
	if int64(len(b)) != f.Size {
		return old, fmt.Errorf("%w (%d bytes, the file has %d)", ErrLength, len(b), f.Size)
	}
	cur := make([]byte, f.Size)
	if _, err := fs.ReadAt(cur, f.Offset); err != nil {
		return old, err
	}
	if bytes.Equal(cur, b) {
		return old, nil
	}
	if _, err := fs.WriteAt(b, f.Offset); err != nil {
		return old, fmt.Errorf("writing %s at byte %d: %w", Name, f.Offset, err)
	}
	return old, nil
}
