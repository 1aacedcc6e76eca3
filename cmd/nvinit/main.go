// Command nvinit is PID 1 of the nvboot appliance. See `nvinit -h` and
// internal/nvinit.
package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nvboot/nvboot/image/guest"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/internal/nvinit"
)

func main() {
	c := &cli.Context{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:]}
	// Run as /sbin/poweroff, reboot or start in an image with a shell:
	// hand the command to PID 1, which owns the shutdown.
	if name := filepath.Base(os.Args[0]); slices.Contains(guest.InitCommands, name) && os.Getpid() != 1 {
		os.Exit(cli.ExitCode(nvinit.Command(c, name, guest.CommandFIFO), os.Stderr, name))
	}
	code := cli.ExitCode(nvinit.Execute(context.Background(), c), os.Stderr, "nvinit")
	if os.Getpid() == 1 {
		// reboot(2) failed: keep the console readable rather than let the
		// kernel panic on init's exit.
		for {
			time.Sleep(time.Hour)
		}
	}
	os.Exit(code)
}
