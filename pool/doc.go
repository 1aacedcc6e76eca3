// Package pool is the client and the parked side of poold, nvboot's process
// pool: the wire protocol (protocol.go), Client.Spawn and Process
// (client.go), the init that parks a program started by poold until it is
// activated (park.go), and Reusable, by which a program lets one process
// serve activation after activation (reuse.go). The daemon is package
// device/poold.
//
// # Parking
//
// A Go program that imports pool parks in the package's init when poold
// started it (NVBOOT_POOL_FD names its socket): it drops poold's variables
// from its environment, faults in its receive buffer, with the prefault
// option populates its executable mappings for reading and its data and
// bss for writing (MADV_POPULATE_READ/WRITE, Linux 5.14; an OFF2F program's
// text is then mapped to its DAX pages), sends Ready and waits. Activation
// sets os.Args, the environment, the working directory and descriptors
// 0..n-1, closes poold's placeholder descriptors with close_range, and
// returns into the remaining inits and main. A program that does not import
// pool gets a prepared child (credentials, cgroup, limits, descriptors) that
// execs it on activation (NVBOOT_POOL_EXEC).
//
// # Reuse
//
// poold's MaxUses: 0, a fresh process per spawn whose end the client hears
// at the reap; 1, a fresh process per spawn whose end the client hears when
// main returns (the process reports and exits, its teardown off the
// client's path); above 1, the process parks again when main returns and
// serves up to MaxUses activations. A program opts in by calling Reusable
// first in main; Reusable then runs main.main once per activation (reached
// by go:linkname). Package variables keep their state between activations;
// flags are reset; a process that calls os.Exit, dies or closes its stdio is
// not reused.
//
// # Protocol
//
// One SOCK_SEQPACKET datagram per message: a 16-byte header (magic NVPL,
// version 1, type, payload length, number of files) and a fixed field list
// (protocol.go has it byte by byte), descriptors by SCM_RIGHTS; at most
// MaxPayload (128 KiB, so a message fits one datagram under the default
// socket buffer) and MaxFiles (64). A client may keep its connection
// (KeepConns: no connect, accept and credential check per spawn) and may
// receive a reporting process's end straight from it through a blocking end
// pipe, one hop instead of two through poold.
//
// # Design
//
//   - Receive buffers are reused, and the parked side makes and faults its
//     buffer in before parking: a 128 KiB allocation per message was a
//     third of the spawn round trip (bench/spawn).
//   - The blocking end pipe stays by construction: it removes a hand-over
//     between runtime threads, though the measured change was within the
//     spread of two runs.
//   - Reuse is opt-in on both sides (MaxUses and Reusable): a program's main
//     is not, in general, safe to run twice.
//
// # Invariants
//
//   - The message layout does not change by accident: TestLayoutFrozen.
//     Encode and Decode round-trip (TestRoundTrip); Decode refuses every
//     malformed message with an error, never a panic (TestDecodeErrors,
//     FuzzDecode); Encode refuses what the layout cannot carry
//     (TestEncodeRefuses).
//   - A stale end pipe of an exited process is not read as the current
//     one's end: TestClientEndPipeStaleExited.
//   - Prefault reads the process's own mappings right: TestParseMapsLine,
//     TestPrefaultSelf.
//   - An activated process behaves as a freshly exec'd one (argv,
//     environment, working directory, descriptors, flags, exit status), and
//     a reused one keeps nothing of the activation before: held with real
//     processes by device/poold's TestActivationFidelity, TestReuseFidelity,
//     TestReuseNeedsDeclaration, TestReuseNoLeaks and TestNoLeaks.
//
// # Limits
//
//   - Only Go programs park before main; others are prepared children that
//     exec on activation, so their runtime start is not saved.
//   - A reused process keeps package state between activations: a program
//     that declares itself Reusable must not rely on fresh globals.
//   - Linux only (SOCK_SEQPACKET, SCM_RIGHTS, close_range, MADV_POPULATE_*).
package pool
