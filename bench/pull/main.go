// Command pull measures the targets of issue 29 (appliances pulling their
// updates from an OCI registry) by real pulls from a real registry (CNCF
// Distribution, htpasswd and TLS, on the host's loopback), the appliances
// in QEMU on the device clock:
//
//	go run ./bench/pull [-poll 5s] [-fleet 4] [-parts big,fleet] [-work DIR] [-json]
//
// big: the big appliance (examples/big.json: Caddy and kv) pushed and
// booted pulling its tag; kv changed is pushed, and the appliance installs
// it through the deploy path. update_bytes.one_service_vs_whole is what
// the registry served the appliance for it (its access log: blobs,
// manifests, the signature; nvpull's own count of the blob bytes must
// agree) over the bytes of the whole image's blobs; kv's downtime is the
// deploy's, on the appliance's clock.
//
// fleet: -fleet appliances of the demo (kv) on one tag, each its own copy,
// polling every -poll; kv changed is pushed, and each appliance's time from
// the push to its install's end (kv serving v2) is taken on its own clock:
// the push's end is placed on that clock by the update endpoint's answer
// right after it (contract.HeaderDeviceClock).
//
// The clock: -icount at 1 GIPS (every guest instruction a nanosecond) with
// idle time passing as the host's (sleep=on): the appliances wait for the
// registry on the network, which the deterministic clock (sleep=off, the
// idle guest jumping to its next timer) cannot carry, since a wait for a
// packet would end at whatever timer comes next. Work counts as a 1-GIPS
// core's, whatever the host's load; what the host's load can move are the
// waits for the host: the registry's answers, and how late an idle guest
// is woken for its timer.
//
// It runs bin/nvboot (push) of the checkout: `make build` first.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/nvboot/nvboot/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := &cli.Context{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:]}
	os.Exit(cli.ExitCode(run(ctx, c), os.Stderr, "bench/pull"))
}
