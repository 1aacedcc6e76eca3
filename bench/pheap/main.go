// Command pheap measures the persistent heap against libpmemobj (PMDK) and
// bbolt, side by side in one run, and reports ratios (DESIGN.md,
// "Measuring").
//
//	go run ./bench/pheap [-json] [-runs 5] [-n 20000] [-dir /dev/shm] [-big 1GiB] [-quick]
//
// Small durable transactions, each system on a fresh file in -dir, round-robin
// run by run:
//   - update64: rewrite one 64-byte value;
//   - mapinsert: insert a new key with a 64-byte value into a persistent hash
//     map (pheap.Map; in C a chained hash table of TX_NEW nodes; a bbolt
//     bucket).
//
// pheap runs over a shared mapping of the file flushed with CLWB (or
// CLFLUSHOPT, CLFLUSH) and SFENCE as on a DAX mapping, libpmemobj with
// PMEM_IS_PMEM_FORCE=1 on the same mount (the same instructions), bbolt with
// its fsync per commit; "pheap-noflush" is pheap with flushes and fences
// off (the cost of durability), "pmemobj-noflush" libpmemobj with
// PMEM_NO_FLUSH=1 (flushes off, fences kept), "pheap-msync" pheap.Create on
// the file, the page-cache mode a non-DAX filesystem gets.
//
// Open-to-first-read: a heap of 1 MiB and one of -big, half full of
// 4000-byte values, the same data in bbolt and in a gob snapshot; each is
// opened and one value read, timed from the open call.
//
// The libpmemobj side is a C program (csrc/) built with gcc at run time; it
// needs libpmemobj-dev. With -json one JSON object goes to stdout; the table
// otherwise; progress always goes to stderr.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	default:
		fmt.Fprintf(os.Stderr, "bench/pheap: %v\n", err)
		os.Exit(1)
	}
}

// config is everything the command line sets.
type config struct {
	JSON  bool   // one JSON object on stdout instead of the table
	Runs  int    // runs of every case
	N     int    // transactions per run
	Dir   string // where the files go (the same mount for every system)
	Big   int64  // size of the big heap of the open workload
	Quick bool   // few transactions, small big heap: proves the benchmark works
}

func run(args []string, stdout, stderr io.Writer) error {
	var c config
	fs := flag.NewFlagSet("bench/pheap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object on stdout")
	fs.IntVar(&c.Runs, "runs", 5, "runs of every case (round-robin)")
	fs.IntVar(&c.N, "n", 20000, "transactions per run")
	fs.StringVar(&c.Dir, "dir", "/dev/shm", "`directory` for the heap, pool and database files (one mount for all)")
	fs.Int64Var(&c.Big, "big", 1<<30, "`bytes` of the big heap in the open-to-first-read case")
	fs.BoolVar(&c.Quick, "quick", false, "2000 transactions, 3 runs, a 64 MiB big heap")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: go run ./bench/pheap [flags]

Durable transactions and open-to-first-read of pheap against libpmemobj and
bbolt on one mount, with the ratios of issue 5 (docs/BENCHMARKS.md).

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, `
Examples:
  go run ./bench/pheap                 # table, about 2 minutes
  go run ./bench/pheap -json > docs/results/pheap.json
  go run ./bench/pheap -quick          # seconds
`)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.Quick {
		c.N, c.Runs, c.Big = 2000, 3, 64<<20
	}
	if c.N < 1 || c.Runs < 1 || c.Big < 1<<20 {
		return fmt.Errorf("-n %d, -runs %d, -big %d: want n and runs ≥ 1, big ≥ 1 MiB", c.N, c.Runs, c.Big)
	}
	o, err := measure(c, stderr)
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSON(stdout, o)
	}
	return writeTable(stdout, o)
}
