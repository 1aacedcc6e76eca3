package appliance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// A build writes its output into a hidden directory beside it,
// .NAME.build-PID-N (PID the builder's process id, N random), and holds an
// exclusive flock on that directory while it runs. Replacing an earlier
// output moves it aside to .NAME.build-PID-N.old for a moment. A build that
// was killed (SIGKILL, a power cut) leaves these behind; the next build of
// NAME removes them when their process is gone and the lock is free.

// startBuild makes and locks the build directory for the output out (its
// parent made if needed), after removing what killed builds of it left.
func startBuild(out string, logf func(string, ...any)) (dir string, unlock func(), err error) {
	parent, name := filepath.Dir(filepath.Clean(out)), filepath.Base(out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", nil, err
	}
	removeStale(parent, name, logf)
	return buildDir(parent, name)
}

// buildDir makes the hidden build directory for the output NAME in parent
// and locks it; unlock releases the lock.
func buildDir(parent, name string) (dir string, unlock func(), err error) {
	dir, err = os.MkdirTemp(parent, "."+name+".build-"+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", nil, err
	}
	f, err := lockDir(dir, false)
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build directory %s: %w", dir, err)
	}
	return dir, func() { f.Close() }, nil
}

// lockDir opens dir and takes an exclusive flock on it; with nonBlocking, a
// lock held elsewhere fails with syscall.EWOULDBLOCK.
func lockDir(dir string, nonBlocking bool) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_EX
	if nonBlocking {
		how |= syscall.LOCK_NB
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// buildDirPattern matches the build directories of the output name: the
// process id in group 1, ".old" in group 2 for an earlier output moved aside.
func buildDirPattern(name string) *regexp.Regexp {
	return regexp.MustCompile(`^\.` + regexp.QuoteMeta(name) + `\.build-([0-9]+)-[0-9]+(\.old)?$`)
}

// removeStale removes the build directories of the output name in parent
// that a killed build left: only those named as buildDir names them, whose
// process is gone and, for a build directory, whose lock is free (a builder
// in another pid namespace holds it). Failures are reported, not fatal: the
// build goes on beside them.
func removeStale(parent, name string, logf func(string, ...any)) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	pat := buildDirPattern(name)
	for _, e := range ents {
		p := filepath.Join(parent, e.Name())
		m := pat.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || processAlive(pid) {
			continue
		}
		if m[2] == "" {
			f, err := lockDir(p, true)
			if err != nil {
				continue // in use, or not ours to judge
			}
			err = os.RemoveAll(p)
			f.Close()
			if err != nil {
				logf("removing %s, left by an interrupted build: %v", p, err)
				continue
			}
		} else if err := os.RemoveAll(p); err != nil {
			logf("removing %s, left by an interrupted build: %v", p, err)
			continue
		}
		logf("removed %s, left by an interrupted build (process %d)", p, pid)
	}
}

// processAlive reports whether process pid exists (or may: anything but
// "no such process" counts as alive).
func processAlive(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return !errors.Is(err, syscall.ESRCH)
}

// checkNotMountPoint refuses an output directory that is a mount point:
// the build puts its output in place by renames of the directory, which
// the kernel refuses for a mount point (EBUSY), and only after the whole
// build. A filesystem mounted there has another st_dev than the parent's;
// a bind mount of a directory of the parent's own filesystem has the
// same, and only /proc/self/mountinfo tells it.
func checkNotMountPoint(dir string) error {
	what := ""
	var st, pst syscall.Stat_t
	if syscall.Stat(dir, &st) == nil && syscall.Stat(filepath.Dir(dir), &pst) == nil && st.Dev != pst.Dev {
		what = "another filesystem than its parent's"
	}
	if fstype, ok := mountedOn("/proc/self/mountinfo", dir); ok {
		what = "a " + fstype + " mount"
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("output directory %s is a mount point (%s): a build replaces its output directory by renaming it, which the kernel refuses for a mount point; build into a directory inside it (-o %s)",
		dir, what, filepath.Join(dir, "image"))
}

// mountedOn says whether the mount table mountinfo (/proc/self/mountinfo's
// format) has a mount on dir, and its filesystem type.
func mountedOn(mountinfo, dir string) (fstype string, ok bool) {
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		f := strings.Fields(line)
		if len(f) < 5 || unescapeMount(f[4]) != dir {
			continue
		}
		fstype = "filesystem"
		if i := slices.Index(f, "-"); i > 0 && i+1 < len(f) {
			fstype = f[i+1]
		}
		ok = true // the last mount on dir is the one seen there
	}
	return fstype, ok
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
