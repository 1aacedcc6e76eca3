// Command nvboot builds nvboot appliance images, boots them in QEMU and
// measures power-on to service. See `nvboot -h`.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/internal/nvbootcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c := &cli.Context{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:]}
	os.Exit(cli.ExitCode(nvbootcmd.Execute(ctx, c), os.Stderr, "nvboot"))
}
