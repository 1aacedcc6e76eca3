package off2fcmd

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/off2f"
)

// manifests collects repeated -manifest flags.
type manifests []string

func (m *manifests) String() string     { return strings.Join(*m, ",") }
func (m *manifests) Set(v string) error { *m = append(*m, v); return nil }

var _ flag.Value = (*manifests)(nil)

func store(_ context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "store", "off2f store ls|gc [-manifest FILE ...] [-json] DIR",
		`ls lists the text files in the store DIR (name = content hash, size).
gc removes the text files that none of the given manifests lists, and leftovers
of interrupted writes (.HASH.off2f-tmp-*), and names every file it removed. A
manifest lists one text hash per line (# comments ok); an image's store has one
at DIR/MANIFEST. gc checks before it removes anything, and refuses without a
manifest, with a manifest that lists no hash, when it would remove every text
file, and on a directory holding anything else than text files named by hash,
MANIFEST, leftovers and directories (not a text store); ls refuses such a
directory too.

Flags may come before or after ls/gc and DIR.`,
		`  off2f store ls /nv/text
  off2f store gc -manifest /nv/text/MANIFEST /nv/text
  off2f store gc -manifest old/MANIFEST -manifest new/MANIFEST out/text
  off2f store -json ls out/text`)
	var ms manifests
	fs.Var(&ms, "manifest", "manifest `FILE` of hashes to keep (repeatable)")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	// Flags may come before the verb, between it and DIR, or after DIR.
	args, err := parseInterleaved(fs, c.Args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		fs.Usage()
		return cli.Usagef("store needs ls or gc")
	}
	verb := args[0]
	if verb != "ls" && verb != "gc" {
		return cli.Usagef("unknown store command %q (want ls or gc)", verb)
	}
	if len(args) != 2 {
		return cli.Usagef("store %s takes one store directory, got %d: %q", verb, len(args)-1, args[1:])
	}
	if verb == "ls" && len(ms) > 0 {
		return cli.Usagef("store ls: -manifest is for gc")
	}
	st := off2f.Store{Dir: args[1]}
	switch verb {
	case "ls":
		entries, err := st.List()
		if err != nil {
			return err
		}
		if *jsonOut {
			return cli.JSON(c.Stdout, struct {
				Store string        `json:"store"`
				Texts []off2f.Entry `json:"texts"`
			}{st.Dir, append([]off2f.Entry{}, entries...)})
		}
		var total int64
		for _, e := range entries {
			fmt.Fprintf(c.Stdout, "%s %12d\n", e.Name, e.Size)
			total += e.Size
		}
		fmt.Fprintf(c.Stdout, "%d text files, %d bytes\n", len(entries), total)
		return nil
	case "gc":
		removed, err := st.GC(ms)
		if err != nil {
			return err
		}
		if *jsonOut {
			return cli.JSON(c.Stdout, struct {
				Store   string        `json:"store"`
				Removed []off2f.Entry `json:"removed"`
			}{st.Dir, append([]off2f.Entry{}, removed...)})
		}
		texts, leftovers := 0, 0
		for _, e := range removed {
			if e.Leftover {
				leftovers++
				fmt.Fprintf(c.Stdout, "removed %s (%d bytes, leftover of an interrupted write)\n", e.Name, e.Size)
			} else {
				texts++
				fmt.Fprintf(c.Stdout, "removed %s (%d bytes)\n", e.Name, e.Size)
			}
		}
		fmt.Fprintf(c.Stdout, "%d text files removed, %d leftovers of interrupted writes removed\n", texts, leftovers)
	}
	return nil
}

// parseInterleaved parses args with flags anywhere among the operands, and
// returns the operands. After "--" everything is an operand.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var operands []string
	for {
		if err := cli.Parse(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(operands, rest...), nil
		}
		if len(rest) == 0 {
			return operands, nil
		}
		operands, args = append(operands, rest[0]), rest[1:]
	}
}
