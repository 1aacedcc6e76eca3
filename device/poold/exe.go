package poold

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/internal/filemode"
)

// CheckExecutable says why path cannot be started as a program, or nil: it
// must exist, be a regular file (after symbolic links), be executable by
// this process, and, when it can be read, start as an ELF binary or a #!
// script does. The error does not repeat path: callers name it.
func CheckExecutable(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("no such file")
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s, not a program", filemode.Describe(fi.Mode()))
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("not executable (mode %v)", fi.Mode().Perm())
	}
	if err := unix.Access(path, unix.X_OK); err != nil {
		return fmt.Errorf("not executable by uid %d: %w", os.Getuid(), err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil // execute-only: what it holds is not ours to read
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	if head = head[:n]; !bytes.HasPrefix(head, []byte("\x7fELF")) && !bytes.HasPrefix(head, []byte("#!")) {
		return errors.New("not a program: neither an ELF binary nor a #! script")
	}
	return nil
}
