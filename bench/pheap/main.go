// Command pheap measures the persistent heap against libpmemobj (PMDK) and
// bbolt, side by side in one run, and reports ratios
// (docs/DEVICE-CLOCK.md#measuring-method).
//
//	go run ./bench/pheap [-json] [-runs 5] [-n 20000] [-dir /dev/shm] [-big 1GiB] [-quick]
//	                     [-guest auto|on|off|only] [-kernel bzImage] [-guest-n 100000] [-guest-runs 5]
//
// Small durable transactions, each system on a fresh file in -dir, round-robin
// run by run:
//   - update64: rewrite one 64-byte value;
//   - mapinsert: insert a new key with a 64-byte value into a persistent hash
//     map (pheap.Map; in C a chained hash table of TX_NEW nodes; a bbolt
//     bucket).
//
// On this machine (-dir, tmpfs by default) pheap runs over a shared mapping
// of the file flushed with CLWB (or CLFLUSHOPT, CLFLUSH) and SFENCE as on a
// DAX mapping, libpmemobj with PMEM_IS_PMEM_FORCE=1 on the same mount (the
// same instructions), bbolt with its fsync per commit (free on tmpfs: its
// ratios are named *_tmpfs); "pheap-noflush" is pheap with flushes and
// fences off (the cost of durability), "pmemobj-noflush" libpmemobj with
// PMEM_NO_FLUSH=1 (flushes off, fences kept), "pheap-msync" pheap.Create on
// the file, the page-cache mode a non-DAX filesystem gets.
//
// The allocator and the checksums (issue 19; churn.go, checksum.go):
//   - churn: -n transactions putting and deleting values of mixed sizes (16 B
//     to 256 KiB) in a 64 MiB heap, about half of it live; then every value
//     deleted and the heap filled again with values of 1 KiB, 100 KB and
//     1 MiB: churn_allocatable_fraction is the smallest fraction of the heap
//     they fill (deterministic: the seed and -n decide it), and
//     churn_fragmentation 1 − largest allocation / free bytes before the
//     delete;
//   - checksums: a kv-like put and get of 64 B, 4 KiB and 64 KiB values on
//     two durable heaps in alternating blocks, one with the checksums and one
//     without (internal/pheapchecksums); checksum_overhead is the median ratio
//     of their times − 1 for 4 KiB, checksum_overhead_get the same for the
//     reads alone.
//
// Open-to-first-read: a heap of 1 MiB and one of -big, half full of
// 4000-byte values, the same data in bbolt and in a gob snapshot; each is
// opened and one value read, timed from the open call.
//
// The guest part (guest.go, inside.go) runs the transactions again on
// persistent memory: a QEMU guest with an emulated NVDIMM as an fsdax
// namespace, ext4 mounted dax=always, pheap.Create's heap (MAP_SYNC, CPU
// flushes), libpmemobj's pool (which maps it MAP_SYNC and sees pmem by
// itself) and bbolt with fsync per commit all on that one mount. Its
// results are named fsdax_*, its environment guest_*; it gives the
// same-storage ratios tx_throughput_vs_bbolt and map_throughput_vs_bbolt,
// and *_fsdax for libpmemobj and the cost of durability.
//
// The libpmemobj side is a C program (csrc/) built with gcc at run time; it
// needs libpmemobj-dev. With -json one JSON object goes to stdout; the table
// otherwise; progress always goes to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nvboot/nvboot/internal/cli"
)

func main() {
	os.Exit(cli.ExitCode(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr, "bench/pheap"))
}

// config is everything the command line sets.
type config struct {
	JSON  bool   // one JSON object on stdout instead of the table
	Runs  int    // runs of every case
	N     int    // transactions per run
	Dir   string // where the files go (the same mount for every system); the guest's NVDIMM image too
	Big   int64  // size of the big heap of the open workload
	Quick bool   // few transactions, small big heap: proves the benchmark works

	// Guest is the fsdax run in QEMU: "auto" (when QEMU and a kernel are
	// here and not -quick; the reason on stderr when skipped), "on" (a
	// failure when it cannot run), "off", "only" (no host part).
	Guest        string
	Kernel       string        // guest bzImage; "": $NVBOOT_KERNEL, then the kernel-config/ cache
	GuestN       int           // transactions per run in the guest
	GuestRuns    int           // runs of every case in the guest
	GuestTimeout time.Duration // the whole guest run
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == insideCommand {
		return inside(args[1:], stdout, stderr)
	}
	var c config
	fs := flag.NewFlagSet("bench/pheap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object on stdout")
	fs.IntVar(&c.Runs, "runs", 5, "runs of every case (round-robin)")
	fs.IntVar(&c.N, "n", 20000, "transactions per run")
	fs.StringVar(&c.Dir, "dir", "/dev/shm", "`directory` for the heap, pool and database files (one mount for all) and the guest's NVDIMM image")
	fs.Int64Var(&c.Big, "big", 1<<30, "`bytes` of the big heap in the open-to-first-read case")
	fs.BoolVar(&c.Quick, "quick", false, "2000 transactions, 3 runs, a 64 MiB big heap; no guest unless -guest on or only")
	fs.StringVar(&c.Guest, "guest", "auto", "the fsdax run in a QEMU guest: `auto`, on, off or only (no host part)")
	fs.StringVar(&c.Kernel, "kernel", "", "guest `bzImage` (default $NVBOOT_KERNEL, then the kernel-config/ cache; never built here)")
	fs.IntVar(&c.GuestN, "guest-n", 100000, "transactions per run in the guest (the same for every system: the map workload's cost grows with it)")
	fs.IntVar(&c.GuestRuns, "guest-runs", 5, "runs of every case in the guest")
	fs.DurationVar(&c.GuestTimeout, "guest-timeout", 2*time.Hour, "limit on the guest run, boot included")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: go run ./bench/pheap [flags]

Durable transactions and open-to-first-read of pheap against libpmemobj and
bbolt on one mount (tmpfs on this machine), then the transactions again on
persistent memory: ext4 dax=always on an fsdax NVDIMM in a QEMU guest, with
the ratios of issue 5; and pheap alone: the fraction of the heap usable
after a churn of mixed sizes and what checksums cost (issue 19;
docs/BENCHMARKS.md).

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, `
Examples:
  go run ./bench/pheap                 # table; host minutes, the guest longer under TCG
  go run ./bench/pheap -json > docs/results/pheap.json
  go run ./bench/pheap -quick          # seconds, host only
  go run ./bench/pheap -quick -guest only   # the guest part, small
`)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.Quick {
		c.N, c.Runs, c.Big = 2000, 3, 64<<20
		if !set["guest-n"] {
			c.GuestN = 300
		}
		if !set["guest-runs"] {
			c.GuestRuns = 1
		}
	}
	if c.N < 1 || c.Runs < 1 || c.Big < 1<<20 || c.GuestN < 1 || c.GuestRuns < 1 {
		return fmt.Errorf("-n %d, -runs %d, -big %d, -guest-n %d, -guest-runs %d: want n and runs ≥ 1, big ≥ 1 MiB",
			c.N, c.Runs, c.Big, c.GuestN, c.GuestRuns)
	}
	o, err := measureAll(c, stderr)
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSON(stdout, o)
	}
	return writeTable(stdout, o)
}

// measureAll runs the host part and the guest part the configuration asks for.
func measureAll(c config, progress io.Writer) (output, error) {
	var kernel string
	switch c.Guest {
	case "off":
	case "auto", "on", "only":
		var err error
		kernel, err = guestReady(c)
		if err == nil && c.Guest == "auto" && c.Quick {
			err = errors.New("-quick (add -guest on to include it)")
		}
		if err != nil {
			if c.Guest != "auto" {
				return output{}, fmt.Errorf("-guest %s: %w", c.Guest, err)
			}
			fmt.Fprintf(progress, "bench/pheap: skipping the guest (fsdax) part, so no same-storage bbolt ratio: %v\n", err)
			kernel = ""
		}
	default:
		return output{}, fmt.Errorf("-guest %q: want auto, on, off or only", c.Guest)
	}
	o := output{Bench: "pheap", Ratios: map[string]float64{}, Env: environment(c)}
	if c.Guest != "only" {
		var err error
		if o, err = measure(c, progress); err != nil {
			return o, err
		}
	}
	if kernel != "" {
		g, accel, err := measureGuest(context.Background(), c, kernel, progress)
		if err != nil {
			return o, err
		}
		mergeGuest(&o, g, kernel, accel)
	}
	return o, nil
}
