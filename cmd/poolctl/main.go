// Command poolctl is poold's command-line client. See `poolctl -h`.
package main

import (
	"context"
	"os"

	"github.com/nvboot/nvboot/device/poolctl"
	"github.com/nvboot/nvboot/internal/cli"
)

func main() {
	c := &cli.Context{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:]}
	os.Exit(poolctl.ExitCode(poolctl.Execute(context.Background(), c), os.Stderr))
}
