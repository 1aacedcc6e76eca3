// Package diskimage is what the partition-table writers, format/gpt and
// format/mbr, share: a partition's size from its source, rounded to whole
// MiB, and the image file written in one go (the tables at their sectors,
// each partition's source copied to its first sector, zeros elsewhere).
// The tables themselves are the callers'.
//
// # Design
//
//   - Partitions are sized in 1 MiB units (2048 sectors), as partitioning
//     tools align them; a source shorter than its partition is padded with
//     zeros, one longer is refused.
//   - The image is written through internal/atomicfile: a temporary file
//     beside it, renamed into place, so a failure leaves no partial image.
//     The file is truncated to its size first, so what nothing writes
//     (empty partitions, a source's padding) is a hole reading as zeros.
//
// # Invariants
//
//   - Sizes round up to 1 MiB; a missing or too large source and a
//     partition without a size are refused naming the image and the
//     partition: TestLBAs.
//   - Write puts each table and source at its sector and nothing
//     elsewhere; a failure leaves nothing behind: TestWrite.
//   - The images format/gpt and format/mbr write through it keep their
//     bytes: their TestWriteFrozen.
//
// # Limits
//
//   - 512-byte sectors only.
package diskimage
