// Package pmem makes stores to persistent memory durable: Flush writes the
// cache lines of a range back towards the memory and Fence orders and
// completes those write-backs. It is the one place pheap and omf take
// their flush primitives from.
//
// # Design
//
// On amd64 Flush uses CLWB, else CLFLUSHOPT, else CLFLUSH, chosen once by
// CPUID (leaf 7 EBX bits 24 and 23; CLFLUSH is architectural), and Fence is
// SFENCE. CLWB over the others because it writes the line back without
// evicting it, so the next read of a just-committed line hits the cache;
// CLFLUSHOPT over CLFLUSH because its flushes are not serialised with each
// other. golang.org/x/sys/cpu does not expose CLWB or CLFLUSHOPT, so the
// package reads CPUID itself (flush_amd64.s).
//
// On arm64 the pair is DC CVAP (clean to the point of persistence,
// ARMv8.2 DCPoP, from golang.org/x/sys/cpu's HasDCPOP, the kernel's hwcap)
// else DC CVAC (clean to the point of coherency, what Linux itself uses for
// pmem on such CPUs), and DSB SY. Other architectures have no user-space
// flush: Available reports false and Flush and Fence do nothing.
//
// # Invariants
//
//   - The pair is a durability point only on memory mapped MAP_SYNC from a
//     DAX filesystem (or on device DAX), where the CPU caches are the only
//     volatile layer. On a page-cache mapping the caller needs msync; when
//     Available is false, always.
//   - Flush never changes the data, whatever the alignment of the range,
//     with every flush variant the CPU supports (TestFlushVariants).
//   - Available is true exactly when Method names an instruction
//     (TestAvailable).
//   - On arm64 the tests run, cross-built, under qemu-aarch64-static
//     (TestArm64UnderQemuUser, from the x86-64 host's go test): on
//     -cpu cortex-a53 (no DCPoP) Flush is DC CVAC, on -cpu max (DCPoP) DC
//     CVAP, and every variant the CPU has runs. Debian 12's qemu-user
//     (7.2) advertises DCPoP but does not emulate DC CVAP in user mode (it
//     dies of SIGILL; QEMU 8.1 does): there the choice of DC CVAP is
//     checked and its run skipped, saying so. pheap's commits run through
//     both paths the same way (pheap's TestCPUFlushPath and
//     TestArm64UnderQemuUser).
//
// That the flushes and fences are placed right is held by pheap's crash
// simulator (package crashsim), not here: a power cut of QEMU loses no cache
// line.
//
// # Limits
//
//   - The arm64 port has run under qemu-user only, never on a board, and
//     assumes 64-byte cache lines (LineSize), as every ARMv8-A core this
//     project targets has (Cortex-A53, -A72, -A76).
//   - Flush does not wait: nothing is durable until Fence returns.
package pmem
