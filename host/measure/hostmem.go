package measure

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// What a guest costs the host in memory, read from /proc (hostmem.go).
//
// A QEMU's proportional set size (smaps_rollup's Pss) is every page it
// maps, each divided by the number of processes mapping it: its guest's
// RAM and QEMU's own heap and translation cache (anonymous, its own), its
// share of QEMU's binary and libraries, and of the pmem files it maps. The
// files every guest of an image uses (its shared text store, which each
// QEMU maps; its disk and kernel, which QEMU reads through the page cache
// and maps not at all) are counted once instead, by the pages of them the
// host's page cache holds (mincore(2)), and a QEMU's Pss of its mappings
// of them is taken out of its own figure (its /proc/PID/smaps), or it
// would count twice. Their caches are dropped before the first guest
// starts (POSIX_FADV_DONTNEED), so what is counted is what the guests
// brought in; and they are dropped again once the guests are measured,
// which lets go of every clean page no process maps: the read-ahead
// around a guest's faults (as large as the host's read_ahead_kb, 8 MiB
// on the virtio disk of the host measured) and the disk's pages, which a
// guest reads into its own RAM. What stays, the pages the guests map,
// each once, is what the host must keep for them; what was cached before
// the drop is reported beside it. mincore over the smaps of the mappings
// because the disk is never mapped, and because it counts a page once
// however many guests map it, without the proportional shares of Pss.

// qemuMemory is one QEMU's memory, in bytes.
type qemuMemory struct {
	Pss, PssAnon, PssFile int64
	// SharedPss is its Pss of mappings of the shared files: counted with
	// the files, not here.
	SharedPss int64
	// RAMPss is its Pss of the guest's RAM: the anonymous mapping of the
	// RAM's size, or QEMU's memfd of it.
	RAMPss int64
	// TCGPss is its Pss of TCG's translation cache: the anonymous
	// executable mapping (or the memfd QEMU names tcg-jit), the code it
	// translated the guest's into; a KVM guest has none.
	TCGPss int64
}

// Own is what the QEMU costs beside the shared files.
func (q qemuMemory) Own() int64 { return q.Pss - q.SharedPss }

// readQEMUMemory reads pid's smaps_rollup and smaps; shared are the shared
// files (their paths as the kernel shows them: EvalSymlinks'd), ramBytes
// the guest's RAM.
func readQEMUMemory(pid int, shared []string, ramBytes int64) (qemuMemory, error) {
	var q qemuMemory
	roll, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return q, fmt.Errorf("reading QEMU's memory: %w", err)
	}
	fields := smapsFields(string(roll))
	var ok bool
	if q.Pss, ok = fields["Pss"]; !ok {
		return q, fmt.Errorf("/proc/%d/smaps_rollup has no Pss line", pid)
	}
	q.PssAnon, q.PssFile = fields["Pss_Anon"], fields["Pss_File"]
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return q, fmt.Errorf("reading QEMU's mappings: %w", err)
	}
	for _, m := range parseSmaps(string(maps)) {
		switch {
		case contains(shared, m.Path):
			q.SharedPss += m.Fields["Pss"]
		case m.Path == "" && strings.Contains(m.Perms, "x"), strings.HasPrefix(m.Path, "/memfd:tcg-jit"):
			q.TCGPss += m.Fields["Pss"]
		case (m.Path == "" || strings.HasPrefix(m.Path, ramMemfd)) && m.Size >= ramBytes && m.Size <= ramBytes+ramSlack:
			// QEMU maps the RAM with room to align it.
			q.RAMPss += m.Fields["Pss"]
		}
	}
	return q, nil
}

// ramMemfd is how smaps names the guest's RAM in 4 KiB pages
// (vm.Config.SmallPageRAM): QEMU's memfd, named after its backend's type.
const ramMemfd = "/memfd:memory-backend-memfd"

// ramSlack is how much larger than the RAM QEMU's mapping of it may be.
const ramSlack = 4 << 20

// smapping is one mapping of /proc/PID/smaps, sizes in bytes.
type smapping struct {
	Path   string
	Perms  string
	Size   int64
	Fields map[string]int64
}

// parseSmaps reads /proc/PID/smaps: a header line per mapping ("start-end
// perms offset dev inode [path]"), then its "Key: N kB" lines.
func parseSmaps(s string) []smapping {
	var out []smapping
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			m := smapping{Perms: f[1], Fields: map[string]int64{}}
			if lo, hi, ok := strings.Cut(f[0], "-"); ok {
				a, err1 := strconv.ParseUint(lo, 16, 64)
				b, err2 := strconv.ParseUint(hi, 16, 64)
				if err1 == nil && err2 == nil && b >= a {
					m.Size = int64(b - a)
				}
			}
			if len(f) >= 6 {
				// A path may hold spaces: it is the rest of the line.
				m.Path = strings.TrimSpace(line[strings.Index(line, f[5]):])
			}
			out = append(out, m)
			continue
		}
		if len(out) == 0 {
			continue
		}
		if k, v, ok := smapsField(line); ok {
			out[len(out)-1].Fields[k] = v
		}
	}
	return out
}

// smapsFields reads the "Key: N kB" lines of s, in bytes.
func smapsFields(s string) map[string]int64 {
	out := map[string]int64{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := smapsField(line); ok {
			out[k] = v
		}
	}
	return out
}

func smapsField(line string) (string, int64, bool) {
	k, rest, ok := strings.Cut(line, ":")
	if !ok || strings.Contains(k, " ") {
		return "", 0, false
	}
	f := strings.Fields(rest)
	if len(f) != 2 || f[1] != "kB" {
		return "", 0, false
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return k, n << 10, true
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// residentBytes is how much of path the host's page cache holds
// (mincore(2) over a mapping that touches nothing).
func residentBytes(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if st.Size() == 0 {
		return 0, nil
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("mapping %s: %w", path, err)
	}
	defer unix.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (st.Size()+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, fmt.Errorf("mincore %s: %w", path, e)
	}
	var n int64
	for _, v := range vec {
		if v&1 != 0 {
			n++
		}
	}
	return min(n*page, st.Size()), nil
}

// dropCache makes the host's page cache let go of path's pages (written
// back first), so that what a run counts of it is what its guests read.
// Pages some process maps stay: dropCache returns what is still resident.
func dropCache(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		f.Close()
		return 0, fmt.Errorf("syncing %s: %w", path, err)
	}
	err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("dropping %s from the page cache: %w", path, err)
	}
	return residentBytes(path)
}

// realPath is p as /proc/PID/smaps names it: absolute, symlinks resolved.
func realPath(p string) (string, error) {
	a, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(a)
}

// readAheadKiB is the read-ahead of the block device holding dir
// (/sys/dev/block/MAJ:MIN, its disk's for a partition); 0 when unknown.
func readAheadKiB(dir string) int {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0
	}
	base := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	for _, p := range []string{"queue/read_ahead_kb", "../queue/read_ahead_kb"} {
		if b, err := os.ReadFile(filepath.Join(base, p)); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return n
			}
		}
	}
	return 0
}

// shmemTHPFile says when the kernel gives shared memory (a memfd: the
// guests' RAM in 4 KiB pages) transparent huge pages.
const shmemTHPFile = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"

// shmemTHP is the mode shmemTHPFile selects ("never", "advise", ...), its
// bracketed word; "" when the kernel has no such file.
func shmemTHP() string {
	b, err := os.ReadFile(shmemTHPFile)
	if err != nil {
		return ""
	}
	return selectedMode(string(b))
}

// selectedMode is the bracketed word of a sysfs mode list
// ("always within_size advise [never] deny force" -> "never").
func selectedMode(s string) string {
	for _, w := range strings.Fields(s) {
		if strings.HasPrefix(w, "[") && strings.HasSuffix(w, "]") {
			return strings.Trim(w, "[]")
		}
	}
	return ""
}
