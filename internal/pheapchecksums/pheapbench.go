package pheapchecksums

import "sync/atomic"

// NoChecksums, while set, makes pheap skip computing the checksum of new
// String and Bytes data and verifying data and block header checksums on
// reads. Headers are still written with their checksums.
var NoChecksums atomic.Bool
