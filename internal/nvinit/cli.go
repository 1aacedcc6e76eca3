package nvinit

import (
	"context"
	"errors"
	"flag"
	"os"

	"github.com/nvboot/nvboot/internal/cli"
)

const description = `nvinit is PID 1 of the nvboot appliance. Started by the kernel, it prints a
NVBOOT-MARK line at each stage (for 'nvboot measure'), mounts /proc, /sys,
/dev, /run and /tmp, makes the OFF2F text store on pmem current (switching a
raw namespace to fsdax and copying the store image onto it when it is blank
or stale) and mounts it read-only at /nv/text, mounts the state filesystem at
/nv/state (writing its template onto the device only when every byte of the
device is zero; one that does not mount and is not blank is left as it is),
then starts the services of the config in order and supervises
them (restart with backoff, readiness, orphans reaped). SIGTERM powers the
machine off and SIGINT (Ctrl-Alt-Del) reboots it, after the services were
stopped (SIGTERM, then SIGKILL after 5 s) and the filesystems unmounted.

It expects to be PID 1. Run otherwise it boots the same way but leaves the
kernel filesystems, hostname and reboot alone, and returns when done; -check
is the mode for the host.

The config is ` + DefaultConfigPath + ` unless -config says otherwise.`

const examples = `  nvinit -check out/config.json     validate a config on the host, print it as JSON
  nvinit -config /etc/nvboot/test.json   (as PID 1: init=/sbin/nvinit -- -config ...)`

// Execute runs nvinit's command line. As PID 1 it never returns while the
// machine is up: a returning init panics the kernel.
func Execute(ctx context.Context, c *cli.Context) error {
	pid1 := os.Getpid() == 1
	fs := cli.FlagSet(c, "nvinit", "nvinit [-config FILE] | nvinit -check FILE", description, examples)
	config := fs.String("config", DefaultConfigPath, "the config to boot with")
	check := fs.String("check", "", "validate this config, print it as JSON and exit")
	if err := cli.Parse(fs, c.Args); err != nil {
		if !pid1 {
			return err
		}
		// The kernel passes unknown command-line words on to init: a typo
		// there must not cost the boot.
		if !errors.Is(err, flag.ErrHelp) {
			(&Console{W: c.Stderr}).Logf("ignoring the arguments %q: %v", c.Args, err)
		}
	}
	if *check != "" {
		cfg, err := LoadConfig(*check)
		if err != nil {
			return err
		}
		return cli.JSON(c.Stdout, cfg)
	}
	b := &Boot{ConfigPath: *config, Console: &Console{W: c.Stdout}, PID1: pid1}
	b.Run(ctx)
	return nil
}
