package poolctl

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/pool"
)

func status(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "status", "poolctl status [-socket PATH] [-json]",
		`Prints each pool: processes parked (idle), the level poold keeps (want),
starting, activated and still running (active), and the memory the parked
ones hold (proportional set size). With -json: one object,
{"programs": [...], "held_bytes": N}.`,
		`  poolctl status
  poolctl status -json | jq '.programs[] | {name, idle}'`)
	st, jsonOut, err := query(ctx, c, fs, "print the pools as JSON", nil)
	if err != nil {
		return err
	}
	if jsonOut {
		return cli.JSON(c.Stdout, poolsJSON{st.Programs, st.HeldBytes})
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "program\tidle\twant\tstarting\tactive\theld")
	for _, p := range st.Programs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", p.Name, p.Idle, p.Want, p.Starting, p.Active, bytesText(p.HeldBytes))
	}
	fmt.Fprintf(tw, "total\t\t\t\t\t%s\n", bytesText(st.HeldBytes))
	return tw.Flush()
}

// poolsJSON is what status -json and reduce -json print: one object.
type poolsJSON struct {
	Programs  []pool.ProgramStats `json:"programs"`
	HeldBytes int64               `json:"held_bytes"`
}

// query adds -socket and -json to fs, parses the verb's arguments, runs
// before (if any) and fetches poold's statistics: what status, stats and
// reduce share.
func query(ctx context.Context, c *cli.Context, fs *flag.FlagSet, jsonHelp string,
	before func(*pool.Client) error) (*pool.Stats, bool, error) {
	socket := socketFlag(fs)
	jsonOut := fs.Bool("json", false, jsonHelp)
	if err := cli.Parse(fs, c.Args); err != nil {
		return nil, false, err
	}
	if fs.NArg() != 0 {
		return nil, false, cli.Usagef("%s takes no arguments, got %q", fs.Name(), fs.Args())
	}
	client := &pool.Client{Socket: *socket}
	if before != nil {
		if err := before(client); err != nil {
			return nil, false, err
		}
	}
	st, err := client.Stats(ctx)
	if err != nil {
		return nil, false, err
	}
	return st, *jsonOut, nil
}

func bytesText(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
