package nvinit

import (
	"context"
	"errors"
	"flag"
	"os"

	"github.com/nvboot/nvboot/device/contract"
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

It expects to be PID 1, and takes flags only. Not PID 1, it refuses to boot
unless -host says to: it then boots the same way on this machine (mounting,
switching and provisioning the devices the config names), leaves the kernel
filesystems, hostname and reboot alone, and returns when done; a missing or
invalid config or an extra argument is an error there, not ignored as it is
for PID 1 (a typo on the kernel command line must not cost the boot).
-check is the mode for the host.

The config is ` + contract.InitConfigPath + ` unless -config says otherwise. nvboot
build validates the config it writes into an image (at that path, in the
image's root filesystem); the output directory holds no copy of it.`

const examples = `  nvinit -check config.json            validate a config on the host, print it as JSON
  nvinit -host -config config.json     boot on this machine though not PID 1
                                       (provisions the devices config.json names)
  nvinit -config /etc/nvboot/test.json (as PID 1: init=/sbin/nvinit -- -config ...)`

// Execute runs nvinit's command line. As PID 1 it never returns while the
// machine is up: a returning init panics the kernel.
func Execute(ctx context.Context, c *cli.Context) error {
	pid1 := os.Getpid() == 1
	fs := cli.FlagSet(c, "nvinit", "nvinit [-config FILE] | nvinit -check FILE | nvinit -host [-config FILE]", description, examples)
	config := fs.String("config", contract.InitConfigPath, "the config to boot with")
	check := fs.String("check", "", "validate this config, print it as JSON and exit")
	host := fs.Bool("host", false, "boot although not PID 1, on this machine: mounts and provisions the devices the config names")
	parseErr := cli.Parse(fs, c.Args)
	if parseErr != nil && !pid1 {
		return parseErr
	}
	if *check != "" {
		if fs.NArg() > 0 {
			return cli.Usagef("-check %s: unexpected argument %q (nvinit takes flags only)", *check, fs.Arg(0))
		}
		cfg, err := readConfig(*check)
		if err != nil {
			return err
		}
		return cli.JSON(c.Stdout, cfg)
	}
	if !pid1 {
		if fs.NArg() > 0 {
			return cli.Usagef("unexpected argument %q (nvinit takes flags only)", fs.Arg(0))
		}
		if !*host {
			return cli.Usagef("not PID 1 (pid %d): nvinit boots only as init; -check FILE validates a config, -host boots on this machine anyway (mounting and provisioning the devices the config names)", os.Getpid())
		}
		// On a host a config that is not there is a mistake, not a device
		// to keep booting.
		if _, err := readConfig(*config); err != nil {
			return err
		}
	} else if parseErr != nil {
		// The kernel passes unknown command-line words on to init: a typo
		// there must not cost the boot.
		if !errors.Is(parseErr, flag.ErrHelp) {
			(&console{W: c.Stderr}).Logf("ignoring the arguments %q: %v", c.Args, parseErr)
		}
	} else if fs.NArg() > 0 {
		(&console{W: c.Stderr}).Logf("ignoring the arguments %q: nvinit takes flags only", fs.Args())
	}
	// Read once and taken out: a re-execution (OFF2F_NOSTORE) or anything
	// nvinit starts must not inherit it.
	ownFallback := os.Getenv(fallbackEnv)
	os.Unsetenv(fallbackEnv)
	b := &boot{ConfigPath: *config, Console: &console{W: c.Stdout}, PID1: pid1, OwnTextFallback: ownFallback}
	b.Run(ctx)
	return nil
}
