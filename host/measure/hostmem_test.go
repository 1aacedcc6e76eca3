package measure

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// What readQEMUMemory reads, from this process's own /proc: a shared file
// mapping is counted as the file's (SharedPss), by the pages touched; an
// anonymous executable mapping as a translation cache; an anonymous one of
// the RAM's size as the RAM; every one in Pss.
// sink keeps the test's reads of a mapping from being optimised away.
var sink byte

func TestReadQEMUMemorySelf(t *testing.T) {
	page := os.Getpagesize()
	file := filepath.Join(t.TempDir(), "shared.img")
	if err := os.WriteFile(file, make([]byte, 64*page), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 64*page, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	for i := 0; i < 16; i++ {
		sink += m[i*page]
	}
	const ram = 8 << 20
	r, err := unix.Mmap(-1, 0, ram, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(r)
	for i := 0; i < 32; i++ {
		r[i*page] = 1
	}
	x, err := unix.Mmap(-1, 0, 16*page, unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Skipf("no anonymous executable mapping here: %v", err)
	}
	defer unix.Munmap(x)
	for i := 0; i < 8; i++ {
		x[i*page] = 1
	}
	real, err := realPath(file)
	if err != nil {
		t.Fatal(err)
	}
	q, err := readQEMUMemory(os.Getpid(), []string{real}, ram)
	if err != nil {
		t.Fatal(err)
	}
	// At least the pages touched; the kernel may map cached neighbours
	// with them (fault-around).
	if q.SharedPss < int64(16*page) || q.SharedPss > int64(64*page) {
		t.Errorf("SharedPss %d, want the 16 pages touched (%d) or a few more", q.SharedPss, 16*page)
	}
	if q.RAMPss < int64(32*page) || q.RAMPss > ram {
		t.Errorf("RAMPss %d, want at least the 32 pages written (%d)", q.RAMPss, 32*page)
	}
	if q.TCGPss < int64(8*page) {
		t.Errorf("TCGPss %d, want at least the 8 executable pages written (%d)", q.TCGPss, 8*page)
	}
	if q.Pss < q.SharedPss+q.RAMPss+q.TCGPss || q.Own() != q.Pss-q.SharedPss {
		t.Errorf("Pss %d less than its parts %+v", q.Pss, q)
	}
}

// The page cache of a file: dropped, then what was read of it.
func TestResidentBytesAndDropCache(t *testing.T) {
	page := os.Getpagesize()
	file := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(file, make([]byte, 256*page), 0o644); err != nil {
		t.Fatal(err)
	}
	left, err := dropCache(file)
	if err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Skipf("the page cache kept %d bytes of a file nobody maps (a filesystem that ignores FADV_DONTNEED?)", left)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 64*page), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	n, err := residentBytes(file)
	if err != nil {
		t.Fatal(err)
	}
	if n < int64(64*page) || n > int64(256*page) {
		t.Errorf("resident %d after reading %d bytes of %d", n, 64*page, 256*page)
	}
	if _, err := residentBytes(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing file: no error")
	}
}

func TestParseSmaps(t *testing.T) {
	s := `55bdd55b6000-55bdd59bd000 r--p 00000000 fe:00 123 /usr/bin/qemu-system-x86_64
Size:               4124 kB
Pss:                2062 kB
7f1717ffe000-7f171fffe000 rw-s 00000000 fe:00 99 /tmp/a dir/pmem-state.img
Size:             131072 kB
Pss:               14424 kB
7f1728000000-7f1767fff000 rwxp 00000000 00:00 0 
Size:            1048572 kB
Pss:               57344 kB
VmFlags: mr mw me
`
	m := parseSmaps(s)
	if len(m) != 3 {
		t.Fatalf("%d mappings, want 3: %+v", len(m), m)
	}
	if m[1].Path != "/tmp/a dir/pmem-state.img" || m[1].Fields["Pss"] != 14424<<10 || m[1].Size != 128<<20 || m[1].Perms != "rw-s" {
		t.Errorf("a file mapping: %+v", m[1])
	}
	if m[2].Path != "" || m[2].Fields["Pss"] != 57344<<10 || !strings.Contains(m[2].Perms, "x") {
		t.Errorf("an anonymous mapping: %+v", m[2])
	}
	if f := smapsFields("Rss: 10 kB\nPss: 7 kB\nPss_Anon: 3 kB\nbogus\n"); f["Pss"] != 7<<10 || f["Pss_Anon"] != 3<<10 || len(f) != 3 {
		t.Errorf("smapsFields: %v", f)
	}
}

// The guest's RAM in 4 KiB pages (vm.Config.SmallPageRAM) is QEMU's memfd
// named after its backend: counted as the RAM as the anonymous one is.
func TestReadQEMUMemoryMemfdRAM(t *testing.T) {
	page := os.Getpagesize()
	const ram = 6 << 20 // a size no other mapping of the test process has
	fd, err := unix.MemfdCreate("memory-backend-memfd", 0)
	if err != nil {
		t.Skipf("no memfd here: %v", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, ram); err != nil {
		t.Fatal(err)
	}
	r, err := unix.Mmap(fd, 0, ram, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(r)
	for i := 0; i < 40; i++ {
		r[i*page] = 1
	}
	q, err := readQEMUMemory(os.Getpid(), nil, ram)
	if err != nil {
		t.Fatal(err)
	}
	if q.RAMPss < int64(40*page) || q.RAMPss > ram {
		t.Errorf("RAMPss %d, want at least the 40 pages written (%d)", q.RAMPss, 40*page)
	}
}

// The sysfs mode list's selected word, and none when nothing is selected.
func TestSelectedMode(t *testing.T) {
	for in, want := range map[string]string{
		"always within_size advise [never] deny force\n": "never",
		"[always] madvise never":                         "always",
		"always madvise never":                           "",
		"":                                               "",
	} {
		if got := selectedMode(in); got != want {
			t.Errorf("selectedMode(%q) = %q, want %q", in, got, want)
		}
	}
}
