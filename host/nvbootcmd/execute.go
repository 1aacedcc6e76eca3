// Package nvbootcmd is the nvboot host tool, runnable in-process by tests:
// build an appliance image, boot it in QEMU, measure power-on to service.
package nvbootcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/nvboot/nvboot/internal/cli"
)

const usage = `Usage: nvboot <command> [flags]

nvboot turns Go services into a minimal Linux appliance image that comes up
fast after power-on: nvinit and the services are OFF2F programs whose text is
mapped straight from persistent memory, and state lives on pmem too.

Commands:
  build     build an appliance image (disk, pmem images, kernel) from a config
  run       boot an image in QEMU with emulated NVDIMMs, serial on the terminal (-shared-text: many at once)
  measure   cold-boot layouts side by side and time power-on to service (-density: host memory of N at once)
  powercut  cut the power at random while writing; check no acknowledged write is lost
  flash     write an image onto an SD card, eMMC or USB device (or a file) and verify it
  deploy    send one service to a running appliance; kept only if it becomes ready
  update    send a whole image to an A/B appliance; kept only if its test boot comes up
  push      build an image and publish it, signed, to an OCI registry for appliances to pull
  status    what a running appliance runs, and what its puller last did
  assemble  write the pmem images and disk of a root tree Buildroot or Yocto filled

Run 'nvboot help <command>' (or 'nvboot <command> -h') for the flags and
examples of each.

A first try, from the nvboot checkout (builds the kernel once, ~10 minutes):
  nvboot build -o out/demo && nvboot run out/demo
`

// Execute runs the nvboot command line in c. A command that fails once ctx
// is cancelled (Ctrl-C, SIGTERM) reports that it was interrupted, not what
// the cancellation killed on the way.
func Execute(ctx context.Context, c *cli.Context) error {
	err := cli.Dispatch(ctx, c, usage, map[string]cli.Command{
		"build":    build,
		"run":      runCmd,
		"measure":  measureCmd,
		"powercut": powercut,
		"flash":    flashCmd,
		"deploy":   deployCmd,
		"update":   updateCmd,
		"push":     pushCmd,
		"status":   statusCmd,
		"assemble": assembleCmd,
	})
	if err != nil && errors.Is(ctx.Err(), context.Canceled) && !errors.Is(err, errInterrupted) &&
		!errors.Is(err, flag.ErrHelp) && !errors.Is(err, cli.ErrUsage) {
		return interrupted(ctx)
	}
	return err
}

// errInterrupted marks the error of a command stopped by a signal.
var errInterrupted = errors.New("interrupted")

// interrupted is the error of a command stopped by ctx's cancellation,
// naming the signal. A command whose own error says what the stop left
// (flash: how far it wrote) wraps it with this.
func interrupted(ctx context.Context) error {
	return fmt.Errorf("%w (%v)", errInterrupted, context.Cause(ctx))
}
