package main

import (
	"bytes"
	"os"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/omf"
)

// costs measures what each method's accesses are made of, on the file at
// path, so a ratio can be explained: a pread(2) of 4 KiB, a demand-paging
// fault on a fresh mapping (per page), mapping a 2 MiB chunk with
// MAP_POPULATE as omf once did (and how many page faults the kernel counted
// for it: 1 when the chunk is mapped by one PMD entry, 512 when by pages),
// and unmapping it, a region-sized populated mapping, and opening and
// closing a File. On the device clock the guest's nanoseconds are its
// instructions at 1 GIPS. Each figure is the median over the file's chunks.
func costs(s *benchjson.Samples, path string, fd *os.File) error {
	buf := make([]byte, 4096)
	for span := range passes {
		base := int64(span) * passSize
		// omf's own steps on one chunk: the first ReadBlock (mmap and
		// prefault), 63 more ReadBlock and Release pairs on the mapped
		// chunk, and Close (munmap, close).
		of, err := omf.Open(path, omf.Options{})
		if err != nil {
			return err
		}
		bs := int64(omf.BlockSize())
		start := time.Now()
		w, err := of.ReadBlock(base/bs, regionSize/bs)
		if err != nil {
			return err
		}
		s.Add("cost_omf_first_readblock", "us", float64(time.Since(start).Nanoseconds())/1e3)
		w.Release()
		start = time.Now()
		for r := int64(1); r < regions; r++ {
			w, err := of.ReadBlock((base+r*regionSize)/bs, regionSize/bs)
			if err != nil {
				return err
			}
			w.Release()
		}
		s.Add("cost_omf_readblock_release", "ns", float64(time.Since(start).Nanoseconds())/(regions-1))
		start = time.Now()
		if err := of.Close(); err != nil {
			return err
		}
		s.Add("cost_omf_close", "us", float64(time.Since(start).Nanoseconds())/1e3)

		// Opening and closing a File with nothing mapped: what omf-open
		// pays above omf-once (openat, statx; close).
		start = time.Now()
		if of, err = omf.Open(path, omf.Options{}); err != nil {
			return err
		}
		if err := of.Close(); err != nil {
			return err
		}
		s.Add("cost_omf_open_close", "us", float64(time.Since(start).Nanoseconds())/1e3)

		// The other way to map a region read once: a mapping of just
		// its 32 KiB, populated by the kernel (MAP_POPULATE), and unmapped.
		start = time.Now()
		m, err := unix.Mmap(int(fd.Fd()), base, regionSize, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return err
		}
		sink += m[0]
		if err := unix.Munmap(m); err != nil {
			return err
		}
		s.Add("cost_region_populate_32k", "us", float64(time.Since(start).Nanoseconds())/1e3)

		// pread: 512 calls over the chunk, the time per call.
		start = time.Now()
		for off := int64(0); off < passSize; off += 4096 {
			if _, err := unix.Pread(int(fd.Fd()), buf, base+off); err != nil {
				return err
			}
		}
		s.Add("cost_pread_4k", "ns", float64(time.Since(start).Nanoseconds())/(passSize/4096))

		// Demand paging: map without populate, touch a byte per page.
		start = time.Now()
		m, err = unix.Mmap(int(fd.Fd()), base, passSize, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return err
		}
		s.Add("cost_mmap_2m", "us", float64(time.Since(start).Nanoseconds())/1e3)
		f0 := pgfaults()
		start = time.Now()
		for off := 0; off < passSize; off += 4096 {
			sink += m[off]
		}
		d := time.Since(start)
		s.Add("cost_demand_fault", "ns", float64(d.Nanoseconds())/(passSize/4096))
		if f0 >= 0 {
			s.Add("cost_demand_faults_per_2m", "faults", float64(pgfaults()-f0))
		}
		unix.Munmap(m)

		// A chunk populated whole, as omf once did: mmap with MAP_POPULATE,
		// then munmap.
		f0 = pgfaults()
		start = time.Now()
		m, err = unix.Mmap(int(fd.Fd()), base, passSize, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return err
		}
		s.Add("cost_populate_2m", "us", float64(time.Since(start).Nanoseconds())/1e3)
		if f0 >= 0 {
			s.Add("cost_populate_faults_per_2m", "faults", float64(pgfaults()-f0))
		}
		s.Add("cost_chunk_aligned_2m", "bool", b2f(uintptr(unsafe.Pointer(&m[0]))%passSize == 0))
		start = time.Now()
		if err := unix.Munmap(m); err != nil {
			return err
		}
		s.Add("cost_munmap_2m", "us", float64(time.Since(start).Nanoseconds())/1e3)

		// Where the chunk is on the device: a DAX fault maps 2 MiB with
		// one PMD entry only if the file's blocks there are one extent
		// starting 2 MiB-aligned on the device. -1: unknown (FIBMAP
		// refused, or the blocks not contiguous).
		s.Add("cost_chunk_phys_offset_mod_2m", "KiB", float64(physMisalign(fd, base)))
	}
	return nil
}

// physMisalign returns where the 2 MiB at off of fd start on the device
// modulo 2 MiB, in KiB (FIBMAP, root only), or -1 when unknown or when
// the blocks are not contiguous.
func physMisalign(fd *os.File, off int64) int64 {
	const fibmap = 1 // FIBMAP, linux/fs.h: _IO(0x00, 1)
	first := int64(-1)
	for blk := off / 4096; blk < (off+passSize)/4096; blk++ {
		b := int32(blk)
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd.Fd(), fibmap, uintptr(unsafe.Pointer(&b))); e != 0 || b == 0 {
			return -1
		}
		if first < 0 {
			first = int64(b)
		} else if int64(b) != first+blk-off/4096 {
			return -1
		}
	}
	return first * 4 % 2048
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// pgfaults is the kernel's count of page faults (/proc/vmstat pgfault),
// which unlike getrusage's counts the faults MAP_POPULATE takes too; -1
// where the kernel does not count it (no CONFIG_VM_EVENT_COUNTERS, as the
// appliance kernel).
func pgfaults() int64 {
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return -1
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("pgfault ")); ok {
			n, _ := strconv.ParseInt(string(v), 10, 64)
			return n
		}
	}
	return -1
}
