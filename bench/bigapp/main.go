// Command bigapp measures power-on to service of appliances of growing text
// size, OFF2F against the other layouts, and charts it (issue 12: "a big
// appliance where OFF2F has something to save").
//
//	go run ./bench/bigapp [-configs A.json,B.json,...] [-layouts off2f,elf,dax-elf] [-runs 3]
//	                      [-storage sd] [-clock device] [-chart FILE] [-work DIR] [-json]
//
// For each image config it measures with host/measure, the engine of
// bin/nvboot measure (build each layout, one untimed first boot, then
// interleaved cold boots), and reads the text size of the services from the
// off2f image. The sizes by default are the three configs of
// examples/: kv alone, the NATS server and kv, Caddy and kv (examples/big.json)
// — real programs, nothing padded.
//
// The text size is what the services started at boot map read-only: the
// memory size of their read-only PT_LOADs (text, rodata, pclntab...), which
// OFF2F moves into the text store. nvinit's is left out (the same in every
// image) and reported apart. How much of it a service really reads at start
// is less, and depends on the program: the ELF layout reads it on demand
// from the disk, page by page with readahead; -bootstat's diagnostic boots
// measure it, and -scale's time-scaled device puts the disk and the core on
// one clock (see run.go's help and docs/BENCHMARKS.md#big-appliance).
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
	os.Exit(cli.ExitCode(run(ctx, c, hostEngine), os.Stderr, "bench/bigapp"))
}
