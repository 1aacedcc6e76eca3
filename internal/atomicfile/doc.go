// Package atomicfile replaces a file so that a crash, a full disk or a
// kill leaves at its path either the whole new file or what was there
// before, never a part: it writes a temporary file beside the path,
// fsyncs it, renames it over the path and fsyncs the directory (the
// rename is durable only then). Every file the tree replaces goes through
// it: the text store's texts and manifests (off2f), the pmem and disk
// images (format/fsdax, format/gpt).
//
// # Design
//
// A package of our own over github.com/google/renameio/v2, which does the
// same up to the rename but does not fsync the directory, and names its
// temporary files "." + name + digits, which a text store's gc could not
// tell from a stranger's file. Here a temporary file is "." + name +
// TempMark + 16 lowercase hex digits (IsTemp), and zero pages of WriteFile's
// data are left as holes. Errors name the final path, never the temporary
// file.
//
// # Invariants
//
//   - Commit puts the whole file in place with its mode; Abort leaves
//     nothing behind: TestCommitAndAbort.
//   - Zero pages stay holes and read back as zeros: TestWriteFileSparse.
//   - Errors name the path: TestCreateErrors. off2f's TestStorePutKilled
//     and TestStorePutFullDisk hold the whole-or-nothing promise under
//     SIGKILL and a full disk.
package atomicfile
