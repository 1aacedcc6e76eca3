package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupV2 reports whether cgroup v2's memory controller is there.
func cgroupV2() bool {
	c, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	return err == nil && strings.Contains(" "+strings.TrimSpace(string(c))+" ", " memory ")
}

// memcg is a memory cgroup for one child: cgroup v2 (memory.max) where
// its memory controller is enabled, else v1 (memory.limit_in_bytes), as
// on this development host.
type memcg struct {
	dir string
	v2  bool
}

// newMemcg makes a cgroup limited to limit bytes of memory (anonymous
// memory and page cache both count, in either version): v1's
// memory.limit_in_bytes, v2's memory.high with memory.max an eighth
// above. ioMax, when not empty, is io.max lines for it (cgroup v2 only):
// the disks' speed model, applied by the kernel's blk-throttle to the
// child's reads and writes, its swap-ins, and the swap-outs of its pages.
// With hard, v2's limit is memory.max alone, as the issue words it: no
// throttling, the OOM killer at the limit (v1's is always hard).
func newMemcg(name string, limit int64, hard bool, ioMax string) (*memcg, error) {
	if cgroupV2() {
		// v2: the controllers must be on for children of the root.
		ctl := "+memory"
		if ioMax != "" {
			ctl += " +io"
		}
		if err := os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte(ctl), 0); err != nil && ioMax != "" {
			return nil, fmt.Errorf("cgroup v2: enabling %s: %w", ctl, err)
		}
		m := &memcg{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
		if err := os.Mkdir(m.dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
		// The limit is memory.high: past it the kernel reclaims and makes
		// the allocating task wait, so swap-outs held by a slow disk (the
		// in-guest io.max: 500 writes a second) are waited for. With it
		// as memory.max alone, linux-swap filling 24 MiB at N = 1024 was
		// OOM-killed by its cgroup within a second. memory.max, an eighth
		// above, is only the backstop; memory.high an eighth below the
		// limit instead throttled the pager, whose budget fills the limit
		// by design, into swapping its own budget.
		max := limit + limit/8
		if hard {
			max = limit
		}
		if err := m.write("memory.max", max); err != nil {
			m.remove()
			return nil, err
		}
		if !hard {
			if err := m.write("memory.high", limit); err != nil {
				m.remove()
				return nil, err
			}
		}
		for _, l := range strings.Split(strings.TrimSpace(ioMax), "\n") {
			if l == "" {
				continue
			}
			if err := os.WriteFile(filepath.Join(m.dir, "io.max"), []byte(l), 0); err != nil {
				m.remove()
				return nil, fmt.Errorf("cgroup io.max %q: %w", l, err)
			}
		}
		return m, nil
	}
	if ioMax != "" {
		return nil, errors.New("a disk model in io.max needs cgroup v2")
	}
	v1 := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(v1, "memory.limit_in_bytes")); err != nil {
		return nil, errors.New("no memory cgroup: neither cgroup v2 with the memory controller nor v1's /sys/fs/cgroup/memory")
	}
	m := &memcg{dir: filepath.Join(v1, name)}
	if err := os.Mkdir(m.dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup v1: %w", err)
	}
	if err := m.write("memory.limit_in_bytes", limit); err != nil {
		m.remove()
		return nil, err
	}
	return m, nil
}

func (m *memcg) write(file string, v int64) error {
	if err := os.WriteFile(filepath.Join(m.dir, file), []byte(strconv.FormatInt(v, 10)), 0); err != nil {
		return fmt.Errorf("cgroup %s: %w", file, err)
	}
	return nil
}

// add moves a process into the cgroup.
func (m *memcg) add(pid int) error { return m.write("cgroup.procs", int64(pid)) }

// peak is the most memory the cgroup held (v2 memory.peak, v1
// memory.max_usage_in_bytes), 0 if unknown.
func (m *memcg) peak() int64 {
	v, _ := strconv.ParseInt(strings.TrimSpace(m.read("memory.peak", "memory.max_usage_in_bytes")), 10, 64)
	return v
}

// read returns the cgroup's file v2 (or v1, in a v1 cgroup), "" if it
// cannot be read.
func (m *memcg) read(v2, v1 string) string {
	name := v1
	if m.v2 {
		name = v2
	}
	b, err := os.ReadFile(filepath.Join(m.dir, name))
	if err != nil {
		return ""
	}
	return string(b)
}

// remove deletes the cgroup; its processes have exited.
func (m *memcg) remove() error { return os.Remove(m.dir) }

// oomKills is how many processes the cgroup's OOM killer killed (v2
// memory.events, v1 memory.oom_control: "oom_kill N"), 0 if unknown.
func (m *memcg) oomKills() int64 {
	for _, l := range strings.Split(m.read("memory.events", "memory.oom_control"), "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
