// Package poolctl is the poolctl command, poold's command-line client,
// runnable in-process by tests.
package poolctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/pool"
)

const usage = `Usage: poolctl <command> [flags] [args]

poolctl talks to poold, nvboot's process pool daemon, over its socket
(` + pool.DefaultSocket + `, or $` + pool.EnvSocket + `, or -socket).

Commands:
  spawn    start a pool program with poolctl's stdio, wait, exit with its status
  status   the pools: parked, wanted, starting, active, memory held
  stats    hits, misses, adds, reduces, deaths, spawn latency histograms
  reduce   trim now what stayed idle past its timeout (admins only)

Run 'poolctl <command> -h' for the flags and examples of each.
`

// Execute runs the poolctl command line in c.
func Execute(ctx context.Context, c *cli.Context) error {
	return cli.Dispatch(ctx, c, usage, map[string]cli.Command{
		"spawn":  spawn,
		"status": status,
		"stats":  stats,
		"reduce": reduce,
	})
}

// ExitStatus is the error of a spawned program that did not succeed: poolctl
// exits with it (128+N for a signal, as shells do).
type ExitStatus int

func (e ExitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// ExitCode maps Execute's error to poolctl's exit status.
func ExitCode(err error, stderr io.Writer) int {
	var es ExitStatus
	if errors.As(err, &es) {
		return int(es)
	}
	return cli.ExitCode(err, stderr, "poolctl")
}

// socketFlag adds -socket to a verb's flags.
func socketFlag(fs *flag.FlagSet) *string {
	return fs.String("socket", "", "poold's socket (default $"+pool.EnvSocket+", else "+pool.DefaultSocket+")")
}
