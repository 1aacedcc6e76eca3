package appliance

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// An image directory has one user at a time: a VM booted from it (nvboot
// run, powercut, measure), whose guest writes its pmem images and reads its
// disk, or a build replacing it. Two VMs would share one pmem file, and a
// build would replace the files under a running guest. The lock is an
// exclusive flock on the directory itself, the one a build holds on the
// directory it writes and renames into place: nothing is written into the
// directory, and the lock goes with the process that holds it, however it
// ends. Whoever holds it is found in /proc/locks, to be named in the error.

// ErrImageBusy is in the error of LockImage (and of a build) when another
// process holds the image directory's lock.
var ErrImageBusy = errors.New("image directory in use")

// LockImage takes the lock of the image directory dir without waiting; the
// error, when another process holds it, wraps ErrImageBusy and names the
// directory and that process. unlock releases it.
func LockImage(dir string) (unlock func(), err error) { return lockImage(dir, false) }

// LockImageShared takes the image directory's lock shared, for a guest
// that only reads what is in it (BootOptions.SharedText: its text store
// read-only, its disk read-only, its own pmem elsewhere): guests of one
// image share it, and a build or a guest that writes the image
// (LockImage) waits for none of them but is refused while one runs.
func LockImageShared(dir string) (unlock func(), err error) { return lockImage(dir, true) }

func lockImage(dir string, shared bool) (unlock func(), err error) {
	// A build renames a new directory into dir's place: the directory
	// opened may no longer be dir once locked. Then lock the new one.
	for try := 0; try < 5; try++ {
		var f *os.File
		if shared {
			f, err = lockDirShared(dir)
		} else {
			f, err = lockDir(dir, true)
		}
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, busy(dir)
		}
		if err != nil {
			return nil, fmt.Errorf("image directory %s: %w", dir, err)
		}
		var locked, now syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &locked); err != nil {
			f.Close()
			return nil, fmt.Errorf("image directory %s: %w", dir, err)
		}
		if err := syscall.Stat(dir, &now); err == nil && now.Dev == locked.Dev && now.Ino == locked.Ino {
			return func() { f.Close() }, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("image directory %s: replaced again and again while being locked (a build looping?)", dir)
}

// lockDirShared is lockDir's shared flock, without waiting.
func lockDirShared(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// lockOut takes the lock of a build's output directory out, when there is
// one (nil unlock when there is none).
func lockOut(out string) (unlock func(), err error) {
	if _, err := os.Stat(out); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return LockImage(out)
}

// busy is the error for dir locked by someone else.
func busy(dir string) error {
	return fmt.Errorf("%w: %s is locked by %s; stop it or wait until it ends, then try again", ErrImageBusy, dir, lockHolder(dir))
}

// lockHolder names the process holding the flock on dir, from /proc/locks:
// "process PID (its command line)", or "another process" when it is not
// found (a holder in another pid namespace shows no pid here).
func lockHolder(dir string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return "another process"
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return "another process"
	}
	defer f.Close()
	// A line: "1: FLOCK  ADVISORY  WRITE 1234 fe:00:9986977 0 EOF", the
	// device as major:minor in hex; waiters' lines have "->" after the id.
	dev := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 6 || fl[1] != "FLOCK" || fl[5] != dev {
			continue
		}
		pid, err := strconv.Atoi(fl[4])
		if err != nil || pid <= 0 {
			continue
		}
		return describeProcess(pid)
	}
	return "another process"
}

// describeProcess is "process PID (command line)", the command line cut
// short when long.
func describeProcess(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	cmd := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if err != nil || cmd == "" {
		return fmt.Sprintf("process %d", pid)
	}
	if r := []rune(cmd); len(r) > 120 {
		cmd = string(r[:117]) + "..."
	}
	return fmt.Sprintf("process %d (%s)", pid, cmd)
}
