// Command nvinit is PID 1 of the nvboot appliance. See `nvinit -h` and
// internal/nvinit.
package main

import (
	"context"
	"os"
	"time"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/internal/nvinit"
)

func main() {
	c := &cli.Context{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:]}
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
