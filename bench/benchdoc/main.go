// Command benchdoc writes docs/BENCHMARKS.md from docs/benchmarks.src.md and
// the result files in docs/results that the source cites: the source's prose
// as it is, and each ```bench block in it replaced by a table of the figures
// it names, read from the result files, with the command that made each file
// and the environment the file records. Its test fails while the committed
// page differs from what it writes, so every figure on the page is the one in
// its result file.
//
//	go run ./bench/benchdoc    # from the repository's root; make docs does it
//
// It sits with the benchmarks, not in internal/, because it reads the results
// through format/benchjson, which internal/ may not import (internal/layers).
package main

//go:generate go run . -root ../..

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/internal/atomicfile"
	"github.com/nvboot/nvboot/internal/cli"
)

func main() {
	os.Exit(cli.ExitCode(run(os.Args[1:]), os.Stderr, "bench/benchdoc"))
}

func run(args []string) error {
	fs := flag.NewFlagSet("benchdoc", flag.ContinueOnError)
	root := fs.String("root", ".", "the repository's root `directory`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return cli.Usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected arguments %q", fs.Args())
	}
	page, err := Generate(*root)
	if err != nil {
		return err
	}
	out := filepath.Join(*root, PagePath)
	if err := atomicfile.WriteFile(out, page, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}
