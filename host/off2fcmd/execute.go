// Package off2fcmd is the off2f command, runnable in-process by tests.
package off2fcmd

import (
	"context"

	"github.com/nvboot/nvboot/internal/cli"
)

const usage = `Usage: off2f <command> [flags] [args]

off2f splits a static executable into an OFF2F program: a small header file that
stays on storage (ELF header, writable data, PT_INTERP = ld-off2f) and a text file
with the read-only part, kept in a text store on persistent memory and mapped
straight from it (DAX) when the program starts.

Commands:
  convert   split an executable into a header file and a text file in the store
  inspect   print every field of a header file or a text file
  verify    check a header file against its text (full hash)
  unpack    rebuild an executable from a header file and its text
  store     list the text store, or remove text no manifest needs (gc)

Run 'off2f <command> -h' for the flags and examples of each.
`

// Execute runs the off2f command line in c.
func Execute(ctx context.Context, c *cli.Context) error {
	return cli.Dispatch(ctx, c, usage, map[string]cli.Command{
		"convert": convert,
		"inspect": inspect,
		"verify":  verify,
		"unpack":  unpack,
		"store":   store,
	})
}
