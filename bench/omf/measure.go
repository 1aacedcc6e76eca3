package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/omf"
)

const (
	regionSize = 32 << 10
	regions    = 64 // per pass: 2 MiB, one omf chunk
	passSize   = regionSize * regions
	// passes is how many spans of passSize the file holds; every run of a
	// method takes the next one, so no pass finds a mapping a pass before
	// it left.
	passes = 8
	// fileSize is the measured file.
	fileSize = passSize * passes
)

// methods in the order they run in a round.
var methods = []string{"read", "bufio", "mmap", "mmap-span", "mmap-open", "omf", "omf-once", "omf-open", "omf-byte", "omf-lazy", "consume"}

// sink keeps the consumer's reads from being optimised away.
//
//lint:ignore U1000 only written: the writes are its job
var sink byte

// consume reads one byte of every 64 of b, and its last: every cache line
// a consumer of the unit would see, every page.
func consume(b []byte) {
	var s byte
	for i := 0; i < len(b); i += 64 {
		s += b[i]
	}
	sink += s + b[len(b)-1]
}

// makeFile writes the measured file in dir and reads it once, so its pages
// are in the page cache (on DAX there is none: the reads are of the pmem).
func makeFile(dir string) (string, error) {
	path := filepath.Join(dir, fmt.Sprintf("bench-omf-%d", os.Getpid()))
	b := make([]byte, fileSize)
	for i := range b {
		b[i] = byte(i*7 + i>>12)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", fmt.Errorf("writing the measured file: %w", err)
	}
	if _, err := os.ReadFile(path); err != nil {
		return "", err
	}
	return path, nil
}

// pass runs one method over span number span in units of unit and returns
// the time per region in µs.
func pass(method, path string, fd *os.File, span, unit int) (float64, error) {
	base := int64(span) * passSize
	buf := make([]byte, unit)
	var of *omf.File
	if method == "omf" || method == "omf-once" || method == "omf-byte" || method == "omf-lazy" {
		var err error
		// omf-lazy: the chunk is mapped but not populated, so its first
		// touch is demand paging, as the mmap method's (on aligned DAX
		// one PMD fault either way: what the prefault's touches cost).
		if of, err = omf.Open(path, omf.Options{NoPopulate: method == "omf-lazy"}); err != nil {
			return 0, err
		}
	}
	// consume: the floor of every method, the consumer alone over a
	// mapping already made and faulted in before the timed span.
	var pre []byte
	if method == "consume" {
		var err error
		if pre, err = unix.Mmap(int(fd.Fd()), base, passSize, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			return 0, fmt.Errorf("mmap: %w", err)
		}
		defer unix.Munmap(pre)
		for off := 0; off < passSize; off += 4096 {
			sink += pre[off]
		}
	}
	runtime.GC() // not inside the timed span
	start := time.Now()
	switch method {
	case "read":
		for off := int64(0); off < passSize; off += int64(unit) {
			if _, err := unix.Pread(int(fd.Fd()), buf, base+off); err != nil {
				return 0, fmt.Errorf("pread: %w", err)
			}
			consume(buf)
		}
	case "bufio":
		r := bufio.NewReaderSize(io.NewSectionReader(fd, base, passSize), 4096)
		for off := 0; off < passSize; off += unit {
			if _, err := io.ReadFull(r, buf); err != nil {
				return 0, err
			}
			consume(buf)
		}
	case "mmap":
		// The seed's "mmap on demand paging": each region mapped on its
		// own, its pages faulted in at first touch, and unmapped.
		for r := int64(0); r < regions; r++ {
			if err := readMapped(fd, base+r*regionSize, regionSize, unit); err != nil {
				return 0, err
			}
		}
	case "mmap-span":
		if err := readMapped(fd, base, passSize, unit); err != nil {
			return 0, err
		}
	case "consume":
		for off := 0; off < passSize; off += unit {
			consume(pre[off : off+unit])
		}
	case "omf", "omf-lazy":
		for r := int64(0); r < regions; r++ {
			if err := readWindow(of, base+r*regionSize, unit); err != nil {
				return 0, err
			}
		}
	case "omf-once":
		// A region on its own, as the seed's mmap side is: the File open
		// before the timed span as mmap's fd is, and per region the
		// window taken (its chunk mapped, the window populated), read, released
		// and the chunk unmapped, so nothing is shared between regions.
		for r := int64(0); r < regions; r++ {
			if err := readWindow(of, base+r*regionSize, unit); err != nil {
				return 0, err
			}
			if n, err := of.Unmap(); err != nil || n == 0 {
				return 0, fmt.Errorf("unmap after region %d: %d bytes, %v", r, n, err)
			}
		}
	case "mmap-open", "omf-open":
		// A region on its own with the file opened for it and closed
		// after, on both sides.
		for r := int64(0); r < regions; r++ {
			if err := readOpened(method, path, base+r*regionSize, unit); err != nil {
				return 0, err
			}
		}
	case "omf-byte":
		for off := int64(0); off < passSize; off += int64(unit) {
			if _, err := of.ReadAt(buf, base+off); err != nil {
				return 0, err
			}
			consume(buf)
		}
	}
	if of != nil {
		if err := of.Close(); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Nanoseconds()) / 1e3 / regions, nil
}

// readMapped maps size bytes of fd at off (no populate: demand paging),
// hands them to the consumer in units and unmaps them.
func readMapped(fd *os.File, off int64, size, unit int) error {
	m, err := unix.Mmap(int(fd.Fd()), off, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap: %w", err)
	}
	for o := 0; o < size; o += unit {
		consume(m[o : o+unit])
	}
	return unix.Munmap(m)
}

// readOpened opens path, reads the region at off in units (mmap-open: an
// mmap of the region, demand paged; omf-open: an omf window), and closes
// it again.
func readOpened(method, path string, off int64, unit int) error {
	if method == "mmap-open" {
		fd, err := os.Open(path)
		if err != nil {
			return err
		}
		err = readMapped(fd, off, regionSize, unit)
		if cerr := fd.Close(); err == nil {
			err = cerr
		}
		return err
	}
	f, err := omf.Open(path, omf.Options{})
	if err != nil {
		return err
	}
	if err := readWindow(f, off, unit); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readWindow takes the window on the region at off, hands it to the
// consumer in units and releases it.
func readWindow(f *omf.File, off int64, unit int) error {
	bs := int64(omf.BlockSize())
	w, err := f.ReadBlock(off/bs, regionSize/bs)
	if err != nil {
		return err
	}
	b := w.Bytes()
	for o := 0; o < regionSize; o += unit {
		consume(b[o : o+unit])
	}
	return w.Release()
}

// measure runs every method and unit, round-robin, in dir.
func measure(c config, dir string, progress io.Writer) (benchjson.Output, error) {
	o := benchjson.Output{Bench: "omf", Env: map[string]string{}, Ratios: map[string]float64{}}
	path, err := makeFile(dir)
	if err != nil {
		return o, err
	}
	defer os.Remove(path)
	fd, err := os.Open(path)
	if err != nil {
		return o, err
	}
	defer fd.Close()
	probe, err := omf.Open(path, omf.Options{})
	if err != nil {
		return o, err
	}
	o.Env["mode"] = probe.Mode()
	// The ratio's definition changed on 2026-11-28 (it was omf-open's);
	// results say which they hold.
	o.Env["omf_vs_mmap_32k"] = "omf-once / mmap: a region on its own, the file open on both sides (omf.File kept, Unmap after each region)"
	probe.Close()
	o.Env["dir"] = dir
	o.Env["file_bytes"] = fmt.Sprint(fileSize)
	s := benchjson.NewSamples()
	span := 0
	for run := range c.Runs {
		fmt.Fprintf(progress, "bench/omf: run %d of %d (%s)\n", run+1, c.Runs, o.Env["mode"])
		for _, u := range c.Units {
			// Each round starts one method further on, so none always
			// runs first.
			for i := range methods {
				m := methods[(i+run)%len(methods)]
				us, err := pass(m, path, fd, span%passes, u)
				if err != nil {
					return o, fmt.Errorf("%s, unit %d: %w", m, u, err)
				}
				span++
				s.Add(figure(m, u), "us", us)
			}
		}
	}
	if err := costs(s, path, fd); err != nil {
		return o, fmt.Errorf("the costs of the accesses: %w", err)
	}
	o.Results = s.Results()
	ratio := func(name, a, b string, u int) {
		if d := s.Median(figure(b, u)); d > 0 && s.Median(figure(a, u)) > 0 {
			o.Ratios[name] = s.Median(figure(a, u)) / d
		}
	}
	// Like for like, as the seed timed it: a region on its own, nothing
	// mapped before it or kept after, on both sides.
	ratio("omf_vs_mmap_32k", "omf-once", "mmap", 32768)
	// The same with the file opened and closed for each region on both
	// sides.
	ratio("omf_open_vs_mmap_open_32k", "omf-open", "mmap-open", 32768)
	// A File kept open (its chunk mapped once for 64 regions) against a
	// mapping made for each region: two ways to use them, not like for like.
	ratio("omf_kept_vs_mmap_32k", "omf", "mmap", 32768)
	// Like for like the other way: both map once for the whole 2 MiB
	// span (64 regions), the kernel's best case (one PMD fault on DAX).
	ratio("omf_vs_mmap_span_32k", "omf", "mmap-span", 32768)
	ratio("omf_vs_read_4k", "omf", "read", 4096)
	ratio("omf_byte_vs_read_4k", "omf-byte", "read", 4096)
	ratio("omf_vs_bufio_4k", "omf", "bufio", 4096)
	ratio("omf_byte_vs_mmap_32k", "omf-byte", "mmap", 32768)
	// The first-touch variant and the floor that every method shares.
	ratio("omf_lazy_vs_mmap_span_32k", "omf-lazy", "mmap-span", 32768)
	ratio("consume_vs_mmap_span_32k", "consume", "mmap-span", 32768)
	return o, nil
}

// figure names a method's time per 32 KiB region at a unit.
func figure(method string, unit int) string {
	return fmt.Sprintf("%s_region_unit_%d", method, unit)
}
