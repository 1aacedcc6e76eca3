// Command nvboot builds nvboot appliance images, boots them in QEMU and
// measures power-on to service. See `nvboot -h`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/nvboot/nvboot/host/nvbootcmd"
	"github.com/nvboot/nvboot/internal/cli"
)

func main() {
	// Ctrl-C, kill (SIGTERM) and a closed terminal (SIGHUP) all cancel the
	// command, which then cleans up (a build removes its half-written
	// output, QEMU is stopped); a second signal ends nvboot at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	c := &cli.Context{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:]}
	os.Exit(cli.ExitCode(nvbootcmd.Execute(ctx, c), os.Stderr, "nvboot"))
}
