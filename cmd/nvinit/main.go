// Command nvinit is PID 1 of the nvboot appliance. See `nvinit -h` and
// device/nvinit.
package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/nvinit"
	"github.com/nvboot/nvboot/internal/cli"
)

func main() {
	c := &cli.Context{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:]}
	// Run as /sbin/poweroff, reboot or start in an image with a shell:
	// hand the command to PID 1, which owns the shutdown.
	if name := filepath.Base(os.Args[0]); slices.Contains(contract.InitCommands, name) && os.Getpid() != 1 {
		os.Exit(cli.ExitCode(nvinit.Command(c, name, contract.CommandFIFO), os.Stderr, name))
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
