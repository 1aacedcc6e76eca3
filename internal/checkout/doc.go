// Package checkout finds the nvboot checkout: the module the commands and
// benchmarks build nvinit, ld-off2f and their guest programs from, and
// whose kernel-config/ and examples/ they use.
//
// Root takes, in order, a -src flag, $NVBOOT_SRC, then the module of the
// current directory (go env GOMOD); the directory must hold cmd/nvinit,
// and the path returned is absolute, since builds run in other
// directories. Its callers' tests (host/nvbootcmd, bench/*) hold it.
package checkout
