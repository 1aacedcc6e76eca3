// Command nvpull pulls the appliance's updates from an OCI registry; nvinit
// starts it when the image config has Update.Registry. See `nvpull -h` and
// device/pull.
package main

import (
	"context"
	"os"

	"github.com/nvboot/nvboot/device/pull"
	"github.com/nvboot/nvboot/internal/cli"
)

func main() {
	c := &cli.Context{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:]}
	os.Exit(cli.ExitCode(pull.Execute(context.Background(), c), os.Stderr, "nvpull"))
}
