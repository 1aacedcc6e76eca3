package pager

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopyPastPresentPage: UFFDIO_COPY stops at a page already there
// (EEXIST when it is the first, EAGAIN after a partial copy); copyPages
// must still install every other page of the range, or the pager would
// count them resident and answer their faults with wakes for ever. Checked
// through mincore, not by touching (a missing page would block the test).
func TestCopyPastPresentPage(t *testing.T) {
	fd, _, _, err := openUffd()
	if err != nil {
		t.Skipf("no userfaultfd here: %v", err)
	}
	defer unix.Close(fd)
	const n = 6
	mem, err := unix.Mmap(-1, 0, n*pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := register(fd, addrOf(mem), n*uintptr(pageSize), false); err != nil {
		t.Fatal(err)
	}
	src := alignedBuf(n * pageSize)
	defer unix.Munmap(src)
	for i := range src {
		src[i] = byte(i/pageSize + 1)
	}
	for _, pre := range []int{0, 3} { // first page (EEXIST), a middle one (EAGAIN)
		if err := unix.Madvise(mem, unix.MADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
		if err := copyPages(fd, addrOf(mem)+uintptr(pre*pageSize), addrOf(src)+uintptr(pre*pageSize), uintptr(pageSize), false, true); err != nil {
			t.Fatal(err)
		}
		if err := copyPages(fd, addrOf(mem), addrOf(src), n*uintptr(pageSize), false, true); err != nil {
			t.Fatalf("page %d there first: %v", pre, err)
		}
		vec := make([]byte, n)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, addrOf(mem), uintptr(len(mem)), addrOf(vec)); e != 0 {
			t.Fatalf("mincore: %v", e)
		}
		for i, v := range vec {
			if v&1 == 0 {
				t.Fatalf("page %d there first: page %d not installed", pre, i)
			}
			if mem[i*pageSize] != byte(i+1) {
				t.Fatalf("page %d there first: page %d holds %d, want %d", pre, i, mem[i*pageSize], i+1)
			}
		}
	}
}
