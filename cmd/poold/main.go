// Command poold is nvboot's process pool daemon. See `poold -h`.
package main

import (
	"context"
	"os"

	"github.com/nvboot/nvboot/device/poold"
	"github.com/nvboot/nvboot/internal/cli"
)

func main() {
	c := &cli.Context{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:]}
	os.Exit(cli.ExitCode(poold.Execute(context.Background(), c), os.Stderr, "poold"))
}
