// Package pheapchecksums is the switch bench/pheap turns to measure what
// pheap's checksums cost: the same workload, the same code, with them and
// without. Go's internal rule keeps it out of reach of programs outside
// this module; inside it, nothing but bench/pheap may set it: a value
// written while it is set carries no valid checksum, so every later read
// of it fails.
package pheapchecksums
