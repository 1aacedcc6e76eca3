package poolctl

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/internal/poold"
	"github.com/nvboot/nvboot/pool"
)

func status(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "status", "poolctl status [-socket PATH] [-json]",
		`Prints each pool: processes parked (idle), the level poold keeps (want),
starting, activated and still running (active), and the memory the parked
ones hold (proportional set size).`,
		`  poolctl status
  poolctl status -json`)
	socket := socketFlag(fs)
	jsonOut := fs.Bool("json", false, "print the pools as JSON")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	st, err := fetch(ctx, *socket)
	if err != nil {
		return err
	}
	if *jsonOut {
		return cli.JSON(c.Stdout, st.Programs)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "program\tidle\twant\tstarting\tactive\theld")
	for _, p := range st.Programs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", p.Name, p.Idle, p.Want, p.Starting, p.Active, bytesText(p.HeldBytes))
	}
	fmt.Fprintf(tw, "total\t\t\t\t\t%s\n", bytesText(st.HeldBytes))
	return tw.Flush()
}

func fetch(ctx context.Context, socket string) (*poold.Stats, error) {
	var st poold.Stats
	if err := clientFor(socket).Stats(ctx, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

func bytesText(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func clientFor(socket string) *pool.Client { return &pool.Client{Socket: socket} }
