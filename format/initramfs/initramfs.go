package initramfs

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/u-root/u-root/pkg/cpio"
)

// Archive collects entries in memory and writes them with WriteTo.
type Archive struct {
	entries map[string]entry
}

type entry struct {
	mode uint32 // type and permission bits, as in stat(2)
	data []byte // file contents, or the symlink target
	rdev [2]uint32
}

const (
	modeDir  = 0o040000
	modeReg  = 0o100000
	modeLink = 0o120000
	modeChr  = 0o020000
)

// New returns an empty archive.
func New() *Archive { return &Archive{entries: map[string]entry{}} }

func clean(name string) (string, error) {
	p := strings.TrimPrefix(path.Clean("/"+name), "/")
	if p == "" || p == "." {
		return "", fmt.Errorf("initramfs: %q: not a path below the root", name)
	}
	return p, nil
}

func (a *Archive) add(name string, e entry) error {
	p, err := clean(name)
	if err != nil {
		return err
	}
	if old, ok := a.entries[p]; ok && (old.mode&0o170000 != modeDir || e.mode&0o170000 != modeDir) {
		return fmt.Errorf("initramfs: %s added twice", p)
	}
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if old, ok := a.entries[d]; ok {
			if old.mode&0o170000 != modeDir {
				return fmt.Errorf("initramfs: %s: parent %s is not a directory", p, d)
			}
			continue
		}
		a.entries[d] = entry{mode: modeDir | 0o755}
	}
	a.entries[p] = e
	return nil
}

// Dir adds a directory.
func (a *Archive) Dir(name string, perm fs.FileMode) error {
	return a.add(name, entry{mode: modeDir | uint32(perm.Perm())})
}

// File adds a regular file with the given contents.
func (a *Archive) File(name string, perm fs.FileMode, data []byte) error {
	return a.add(name, entry{mode: modeReg | uint32(perm.Perm()), data: data})
}

// CopyFile adds the host file src as name, keeping its permission bits.
func (a *Archive) CopyFile(name, src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("initramfs: %s: not a regular file", src)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return a.File(name, st.Mode().Perm(), b)
}

// Symlink adds a symbolic link name -> target.
func (a *Archive) Symlink(name, target string) error {
	if target == "" {
		return fmt.Errorf("initramfs: symlink %s: empty target", name)
	}
	return a.add(name, entry{mode: modeLink | 0o777, data: []byte(target)})
}

// CharDev adds a character device node (e.g. dev/console 5:1, which the kernel
// opens for init's stdio before devtmpfs is mounted).
func (a *Archive) CharDev(name string, perm fs.FileMode, major, minor uint32) error {
	return a.add(name, entry{mode: modeChr | uint32(perm.Perm()), rdev: [2]uint32{major, minor}})
}

// WriteTo writes the archive, entries sorted by path, ending with the
// TRAILER!!! record, through u-root's newc writer
// (github.com/u-root/u-root/pkg/cpio): its records are what ours were,
// field for field (TestSameBytesAsTheHandWrittenWriter), so the archives
// are the bytes they were. Inode numbers count up in write order; mtime,
// uid, gid and the device are 0, as cpio.MakeReproducible leaves them.
func (a *Archive) WriteTo(w io.Writer) (int64, error) {
	names := make([]string, 0, len(a.entries))
	for n := range a.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	cw := &countWriter{w: w}
	rw := cpio.Newc.Writer(cw)
	for i, n := range names {
		e := a.entries[n]
		nlink := uint64(1)
		if e.mode&0o170000 == modeDir {
			nlink = 2
		}
		r := cpio.StaticRecord(e.data, cpio.Info{Ino: uint64(i + 1), Mode: uint64(e.mode), NLink: nlink,
			Rmajor: uint64(e.rdev[0]), Rminor: uint64(e.rdev[1]), Name: n})
		if err := rw.WriteRecord(r); err != nil {
			return cw.n, fmt.Errorf("initramfs: %s: %w", n, err)
		}
	}
	// u-root's cpio.TrailerRecord has a link count of 0; GNU cpio, the
	// kernel's gen_init_cpio and our archives before said 1. The kernel
	// reads neither.
	if err := rw.WriteRecord(cpio.StaticRecord(nil, cpio.Info{Name: cpio.Trailer, NLink: 1})); err != nil {
		return cw.n, fmt.Errorf("initramfs: %w", err)
	}
	return cw.n, nil
}

// Bytes returns the archive as one byte slice.
func (a *Archive) Bytes() []byte {
	var b bytes.Buffer
	a.WriteTo(&b) // a bytes.Buffer does not fail
	return b.Bytes()
}

// countWriter counts what WriteTo wrote.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ErrNoBusybox is returned by FindBusybox when no static busybox is installed.
var ErrNoBusybox = errors.New("initramfs: no static busybox (apt-get install busybox-static)")

// FindBusybox returns the path of a static busybox on this machine.
func FindBusybox() (string, error) {
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && isStatic(p) {
			return p, nil
		}
	}
	return "", ErrNoBusybox
}

// isStatic reports whether the ELF file at p has no program interpreter.
func isStatic(p string) bool {
	f, err := elf.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, ph := range f.Progs {
		if ph.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}
