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
of interrupted writes. A manifest lists one text hash per line (# comments ok);
an image's store has one at DIR/MANIFEST. gc without a manifest refuses.`,
		`  off2f store ls /nv/text
  off2f store gc -manifest /nv/text/MANIFEST /nv/text
  off2f store gc -manifest old/MANIFEST -manifest new/MANIFEST out/text`)
	var ms manifests
	fs.Var(&ms, "manifest", "manifest `FILE` of hashes to keep (repeatable)")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	if len(c.Args) == 0 {
		fs.Usage()
		return cli.Usagef("store needs ls or gc")
	}
	verb := c.Args[0]
	switch verb {
	case "-h", "-help", "--help": // store -h, and off2f help store
		return cli.Parse(fs, c.Args[:1])
	}
	if err := cli.Parse(fs, c.Args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("store %s takes one store directory, got %d", verb, fs.NArg())
	}
	st := off2f.Store{Dir: fs.Arg(0)}
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
		for _, e := range removed {
			fmt.Fprintf(c.Stdout, "removed %s (%d bytes)\n", e.Name, e.Size)
		}
		fmt.Fprintf(c.Stdout, "%d text files removed\n", len(removed))
		return nil
	}
	return cli.Usagef("unknown store command %q (want ls or gc)", verb)
}
