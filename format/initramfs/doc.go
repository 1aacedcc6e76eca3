// Package initramfs writes Linux initramfs archives: cpio in the "newc"
// format (Documentation/driver-api/early-userspace/buffer-format.rst), which
// the kernel unpacks into its rootfs before running /init (or rdinit=). The
// appliance's initramfs layout carries nvinit and the services in one; the
// VM runner's script guests are initramfs archives too.
//
// Archives are reproducible: entries are written sorted by path with mtime
// 0, uid/gid 0 and inode numbers in write order, so the same inputs give the
// same bytes. Parent directories are added on demand; a path added twice, or
// below a non-directory, is an error.
//
// # Design
//
//   - The records are written by u-root's cpio package
//     (github.com/u-root/u-root/pkg/cpio), which u-root's own initramfs
//     builder uses, over a newc writer of our own: the same bytes, 78 KB
//     more in nvboot, and 11–14 ms for a 16 MiB archive (BenchmarkWrite)
//     against 9 ms, which is no reason to keep a writer of our own.
//   - The trailer's link count is set to 1, as GNU cpio writes it, where
//     u-root's TrailerRecord has 0.
//
// # Invariants
//
//   - GNU cpio reads what is written back to the same files:
//     TestCpioReadsIt.
//   - The same inputs give the same bytes: TestReproducible; and the bytes
//     are pinned (a sample archive's and an appliance-sized one's SHA-256):
//     TestSameBytesAsTheHandWrittenWriter, TestBigSameBytes.
//   - Bad paths and duplicates are refused: TestRejects.
//
// # Limits
//
//   - The archive is built in memory before it is written.
//   - Only directories, regular files, symbolic links and character device
//     nodes are written.
package initramfs
