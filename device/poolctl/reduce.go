package poolctl

import (
	"context"
	"fmt"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/pool"
)

func reduce(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "reduce", "poolctl reduce [-socket PATH] [-json]",
		`Asks poold to trim now the parked processes that stayed idle past their
program's IdleTimeout (down to MinIdle), as its reduce tick would, then prints
the pools (with -json as status -json does: one object, {"programs": [...],
"held_bytes": N}). Only admins (Admins in poold's config) may.`,
		`  poolctl reduce
  poolctl reduce -json`)
	st, jsonOut, err := query(ctx, c, fs, "print the pools after reducing as JSON",
		func(cl *pool.Client) error { return cl.Reduce(ctx) })
	if err != nil {
		return err
	}
	if jsonOut {
		return cli.JSON(c.Stdout, poolsJSON{st.Programs, st.HeldBytes})
	}
	for _, p := range st.Programs {
		fmt.Fprintf(c.Stdout, "%s: %d parked, %d reduced since start, %s held\n", p.Name, p.Idle, p.Reduced, bytesText(p.HeldBytes))
	}
	return nil
}
