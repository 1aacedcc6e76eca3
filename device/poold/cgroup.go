package poold

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// openCgroup creates (if needed) and opens a cgroup v2 directory for
// processes to start in (CLONE_INTO_CGROUP). memMax > 0 becomes its
// memory.max; warn is told when the hierarchy has no memory controller to
// apply it with.
func openCgroup(dir string, memMax int64, warn func(format string, args ...any)) (*os.File, error) {
	root, err := cgroup2Root(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	if memMax > 0 {
		ok, err := enableMemory(root, dir)
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: memory.max = %d: %w", dir, memMax, err)
		}
		if !ok {
			warn("cgroup %s: memory.max not set to %d: the cgroup v2 hierarchy at %s has no memory controller (cgroup v1 holds it?); CgroupMemoryMax is not applied",
				dir, memMax, root)
		} else if err := os.WriteFile(filepath.Join(dir, "memory.max"), fmt.Appendf(nil, "%d", memMax), 0); err != nil {
			return nil, fmt.Errorf("cgroup %s: setting memory.max = %d: %w", dir, memMax, err)
		}
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	return f, nil
}

// cgroup2Magic is CGROUP2_SUPER_MAGIC (linux/magic.h).
const cgroup2Magic = 0x63677270

// cgroup2Root returns the root of the cgroup2 hierarchy dir lies in; dir
// itself may not exist yet, its nearest existing ancestor must be a cgroup.
func cgroup2Root(dir string) (string, error) {
	d := filepath.Clean(dir)
	for {
		var st unix.Statfs_t
		err := unix.Statfs(d, &st)
		if err == nil {
			if st.Type != cgroup2Magic {
				return "", fmt.Errorf("cgroup %s: %s is not in a cgroup v2 hierarchy (%s)", dir, d, cgroup2Mounts())
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(d) == d {
			return "", fmt.Errorf("cgroup %s: %s: %w", dir, d, err)
		}
		d = filepath.Dir(d)
	}
	for {
		up := filepath.Dir(d)
		var st unix.Statfs_t
		if up == d || unix.Statfs(up, &st) != nil || st.Type != cgroup2Magic {
			return d, nil
		}
		d = up
	}
}

// cgroup2Mounts says where cgroup2 is mounted, for an error message.
func cgroup2Mounts() string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var at []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// id parent major:minor root mountpoint options [tags] - fstype ...
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) > 4 && len(g) > 0 && g[0] == "cgroup2" {
			at = append(at, f[4])
		}
	}
	if len(at) == 0 {
		return "no cgroup2 filesystem is mounted"
	}
	return "cgroup2 is mounted at " + strings.Join(at, ", ")
}

// enableMemory enables the memory controller in cgroup.subtree_control of
// every cgroup from root down to dir's parent, so dir has memory.max. ok is
// false when the hierarchy has no memory controller (root does not list
// it in cgroup.controllers).
func enableMemory(root, dir string) (ok bool, err error) {
	rel, err := filepath.Rel(root, filepath.Dir(dir))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return false, fmt.Errorf("%s is not below %s", dir, root)
	}
	d := root
	steps := []string{""}
	if rel != "." {
		steps = append(steps, strings.Split(rel, "/")...)
	}
	for _, s := range steps {
		d = filepath.Join(d, s)
		ctrl, err := os.ReadFile(filepath.Join(d, "cgroup.controllers"))
		if err != nil {
			return false, err
		}
		if !hasWord(ctrl, "memory") {
			if d == root {
				return false, nil
			}
			return false, fmt.Errorf("%s/cgroup.controllers lacks memory", d)
		}
		sub := filepath.Join(d, "cgroup.subtree_control")
		cur, err := os.ReadFile(sub)
		if err != nil {
			return false, err
		}
		if hasWord(cur, "memory") {
			continue
		}
		if err := os.WriteFile(sub, []byte("+memory"), 0); err != nil {
			return false, fmt.Errorf("enabling the memory controller: writing +memory to %s: %w", sub, err)
		}
	}
	return true, nil
}

func hasWord(b []byte, w string) bool {
	for _, f := range strings.Fields(string(b)) {
		if f == w {
			return true
		}
	}
	return false
}
