// Command omf measures on-memory file access (package omf) against read(2),
// a buffered reader (fread-style) and mmap with demand paging, side by side
// in one run, and reports ratios (docs/DEVICE-CLOCK.md#measuring-method).
//
//	go run ./bench/omf [-json] [-runs 7] [-dir DIR] [-units 1,4,...,32768] [-quick]
//	                   [-guest auto|on|off|only] [-kernel bzImage] [-clock device|wall] [-cpu-rate 1e9]
//
// The seed's method (AnT's OMF): the time to access a 32 KiB region of a
// file in units of 1 B to 32 KiB. Every access hands the consumer a []byte
// of the unit, which reads one byte of every 64 (so every page is touched).
// A pass walks 64 consecutive regions (2 MiB, one omf chunk) of a file
// whose pages are in the page cache (or on DAX pmem), each method in turn,
// round-robin run by run; a region's time is the pass's time / 64:
//   - read: pread(2) of each unit into a buffer;
//   - bufio: a 4 KiB bufio.Reader (glibc's fread buffers st_blksize bytes)
//     reading the pass's span in units;
//   - mmap: the seed's mmap on demand paging: each region mapped on its
//     own (no populate), units read from the mapping (a page fault at
//     first touch of each page, or of each fault-around batch on the page
//     cache), unmapped;
//   - mmap-span: the kernel's best case: the pass's whole span mapped at
//     its start, read as mmap reads, unmapped at its end (on aligned DAX
//     one PMD fault for the 64 regions);
//   - mmap-open: mmap with the file opened for the region and closed
//     after it;
//   - omf: omf.Open untimed; per region ReadBlock of its 8 blocks (the
//     first maps the chunk and populates its window), units read from the window,
//     Release; Close at the end (it unmaps);
//   - omf-once: a region on its own, as mmap's: omf.Open untimed (as
//     mmap's fd is opened); per region ReadBlock (mapping the chunk,
//     populating the window), the units, Release and Unmap, so no chunk
//     mapping is shared between regions;
//   - omf-open: omf-once with the File opened for the region and closed
//     after it (Open, ReadBlock, the units, Release, Close);
//   - omf-byte: the same as omf with ReadAt of each unit into a buffer;
//   - omf-lazy: omf with Options.NoPopulate: the chunk is demand paged at
//     first touch, as mmap-span's span is;
//   - consume: the floor every method shares: the units read from a
//     mapping made and faulted in before the timed span.
//
// Ratios: omf_vs_mmap_32k (omf-once / mmap, unit 32 KiB: a region on its
// own on both sides, the seed's method), omf_vs_read_4k (omf / read, unit
// 4 KiB), and omf_open_vs_mmap_open_32k (a region on its own with the
// file opened for it on both sides), omf_vs_mmap_span_32k (both map the
// span once),
// omf_kept_vs_mmap_32k (omf / mmap: a kept File against a mapping per
// region, two ways of use, not like for like), omf_byte_vs_read_4k,
// omf_vs_bufio_4k, omf_lazy_vs_mmap_span_32k, consume_vs_mmap_span_32k. With the
// guest part (a QEMU guest, ext4 dax=always on an fsdax NVDIMM) the
// unprefixed ratios are the guest's, on DAX as the targets are, and
// the host's are named host_*; without it they are the host's.
//
// The guest runs on the device clock by default (-clock device: QEMU's
// instruction counter, -icount, at -cpu-rate instructions per second of
// guest time), and its figures are taken with the guest's own clock, so
// they are a 1-GIPS core's, not the emulator's; env's clock and cpu_rate
// say which (docs/DEVICE-CLOCK.md#the-device-clock).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/nvboot/nvboot/host/guestrun"
	"github.com/nvboot/nvboot/internal/cli"
)

func main() {
	os.Exit(cli.ExitCode(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr, "bench/omf"))
}

// config is everything the command line sets.
type config struct {
	JSON   bool
	Runs   int
	Dir    string // where the file is: its filesystem is what is measured
	Units  []int
	Quick  bool
	Guest  string // auto, on, off, only
	Kernel string
	Clock  *guestrun.Clock // the guest's: device (QEMU -icount) or wall
	// CPURate is the guest's vm.Config.CPURate: 0 on the wall clock.
	CPURate int64
	// AlignFS makes the guest's ext4 with 2 MiB-aligned large
	// allocations (guestrun.AlignedDAX), so DAX can map 2 MiB at once.
	AlignFS bool
}

const insideCommand = "inside"

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == insideCommand {
		return inside(args[1:], stdout, stderr)
	}
	var c config
	fs := flag.NewFlagSet("bench/omf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object on stdout")
	fs.IntVar(&c.Runs, "runs", 7, "runs of every method and unit (round-robin)")
	fs.StringVar(&c.Dir, "dir", os.TempDir(), "`directory` for the file: the filesystem measured (a disk's page cache on the host)")
	units := fs.String("units", "1,4,16,64,256,1024,4096,16384,32768", "access `sizes` in bytes, each a power of two ≤ 32768")
	fs.BoolVar(&c.Quick, "quick", false, "3 runs, units 1024, 4096, 32768; no guest unless -guest on or only")
	fs.StringVar(&c.Guest, "guest", "auto", "the DAX run in a QEMU guest: `auto`, on, off or only")
	fs.StringVar(&c.Kernel, "kernel", "", "guest `bzImage` (default $NVBOOT_KERNEL, then the kernel-config/ cache; never built here)")
	c.Clock = guestrun.AddClockFlags(fs)
	fs.BoolVar(&c.AlignFS, "align-fs", true, "make the guest's ext4 with a 2 MiB stripe, so a large file's blocks start 2 MiB-aligned and DAX can map them 2 MiB at a time (a PMD entry); false: mkfs.ext4's defaults")
	fs.Usage = func() {
		fmt.Fprintf(stdout, `Usage: go run ./bench/omf [flags]

Time to access a 32 KiB region of a file in units of 1 B to 32 KiB: omf's
block windows and byte reads against read(2), a buffered reader and mmap
with demand paging, on the host's page cache and on DAX pmem in a QEMU
guest (issue 17; docs/BENCHMARKS.md).

Flags:
`)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fmt.Fprintf(stdout, `
Examples:
  go run ./bench/omf -quick -guest off        # seconds, host only
  go run ./bench/omf -json > docs/results/omf.json
  go run ./bench/omf -guest only -kernel bzImage
`)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (try -h)", fs.Arg(0))
	}
	if c.Quick {
		c.Runs = 3
		if !isSet(fs, "units") {
			*units = "1024,4096,32768"
		}
	}
	var err error
	if c.Units, err = parseUnits(*units); err != nil {
		return fmt.Errorf("-units %q: %w", *units, err)
	}
	if c.CPURate, err = c.Clock.CPURate(); err != nil {
		return err
	}
	if c.Runs < 1 {
		return fmt.Errorf("-runs %d: want at least 1", c.Runs)
	}
	o, err := measureAll(c, stderr)
	if err != nil {
		return err
	}
	return emit(stdout, c.JSON, o)
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseUnits reads a comma-separated list of powers of two up to 32 KiB.
func parseUnits(s string) ([]int, error) {
	var us []int
	for _, f := range strings.Split(s, ",") {
		u, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if u < 1 || u > regionSize || u&(u-1) != 0 {
			return nil, fmt.Errorf("%d is not a power of two from 1 to %d", u, regionSize)
		}
		us = append(us, u)
	}
	return us, nil
}
