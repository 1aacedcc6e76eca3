// Command off2f converts static executables into OFF2F programs and manages the
// text store. See `off2f -h`.
package main

import (
	"context"
	"os"

	"github.com/nvboot/nvboot/host/off2fcmd"
	"github.com/nvboot/nvboot/internal/cli"
)

func main() {
	c := &cli.Context{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:]}
	os.Exit(cli.ExitCode(off2fcmd.Execute(context.Background(), c), os.Stderr, "off2f"))
}
