// Package cli holds what every nvboot command shares: the I/O context that
// makes a command runnable in-process by tests, flag sets with
// newcomer-readable help, progress lines and JSON output.
//
// Every command's main is a few lines that build a Context and call
// Execute in a package, so tests run the real command in-process (gokrazy's
// gok is built the same way).
//
// # Invariants
//
//   - Help goes to stdout and exits 0; usage errors go to stderr, said once:
//     TestHelpToStdout, TestUsageErrorsToStderr, TestFlagErrorSaidOnce.
//   - Flags may follow the arguments: TestFlagsAfterArguments.
//   - Progress lines: TestProgress.
package cli
