// Package pheapbench is the switch bench/pheap turns to measure what
// pheap's checksums cost: the same workload, the same code, with them and
// without (issue 19). Go's internal rule keeps it out of reach of programs
// outside this module; inside it, nothing but bench/pheap may set it: a
// value written while it is set carries no valid checksum, so every later
// read of it fails.
package pheapchecksums

import "sync/atomic"

// NoChecksums, while set, makes pheap skip computing the checksum of new
// String and Bytes data and verifying data and block header checksums on
// reads. Headers are still written with their checksums.
var NoChecksums atomic.Bool
