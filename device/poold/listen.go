package poold

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/internal/filemode"
)

// Listener is poold's API socket. Close stops listening and removes the
// socket file only if it is still the one Listen made (a socket another
// poold made at the path since is left alone).
type Listener struct {
	*net.UnixListener
	path     string
	dev, ino uint64
	once     sync.Once
}

// Listen makes the API socket at path; anyone may connect, peer
// credentials decide what they may do. It replaces only a stale socket (a
// socket file nothing accepts on: connecting is refused). A socket some
// process accepts on is "in use by another poold" (or program), and
// anything else at path is "not a socket": both are errors, and what is at
// path is left as it is.
func Listen(path string) (*Listener, error) {
	if err := removeStale(path); err != nil {
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	// Close removes the socket itself, and only if it is still ours.
	ln.SetUnlinkOnClose(false)
	l := &Listener{UnixListener: ln, path: path}
	fi, err := os.Lstat(path)
	if err == nil {
		st := fi.Sys().(*syscall.Stat_t)
		l.dev, l.ino = st.Dev, st.Ino
		err = os.Chmod(path, 0o666)
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	return l, nil
}

// Close stops listening (if Serve has not already) and removes the socket
// file if it is still the one Listen made.
func (l *Listener) Close() error {
	err := l.UnixListener.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	l.once.Do(func() {
		fi, serr := os.Lstat(l.path)
		if serr != nil {
			return
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Dev == l.dev && st.Ino == l.ino {
			if rerr := os.Remove(l.path); rerr != nil && err == nil {
				err = rerr
			}
		}
	})
	return err
}

// removeStale removes the socket at path if it is stale: a socket file
// whose connections are refused (its poold died without removing it).
// Nothing at path is fine; anything else is an error.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("not a socket (%s), poold leaves it as it is", filemode.Describe(fi.Mode()))
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.Dial("unixpacket", path)
	switch {
	case err == nil:
		c.Close()
		return errors.New("in use by another poold (it accepts connections); stop it first, or give another -socket")
	case errors.Is(err, syscall.ECONNREFUSED):
		// Stale: nothing listens on it.
	case errors.Is(err, syscall.ENOENT):
		return nil // removed meanwhile
	case errors.Is(err, syscall.EPROTOTYPE):
		return errors.New("in use by another program (a socket of another type accepts on it)")
	default:
		return fmt.Errorf("cannot tell whether the socket is stale: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the stale socket: %w", err)
	}
	return nil
}
