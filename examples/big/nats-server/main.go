// Command nats-server is the NATS message server
// (github.com/nats-io/nats-server/v2), the mid-size service of bench/bigapp:
// a real server whose text lies between kv's and Caddy's. Its main package
// is upstream's own, cut to what the appliance uses (the flags, the server,
// its HTTP monitoring port); it lives in its own module so that nvboot's
// go.mod does not carry its dependencies.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/nats-io/nats-server/v2/server"
)

func main() {
	const exe = "nats-server"
	fs := flag.NewFlagSet(exe, flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: %s [options]; see https://docs.nats.io/running-a-nats-service/introduction/flags\n", exe)
		os.Exit(2)
	}
	opts, err := server.ConfigureOptions(fs, os.Args[1:], server.PrintServerAndExit, fs.Usage, server.PrintTLSHelpAndDie)
	if err != nil {
		server.PrintAndDie(fmt.Sprintf("%s: %s", exe, err))
	}
	s, err := server.NewServer(opts)
	if err != nil {
		server.PrintAndDie(fmt.Sprintf("%s: %s", exe, err))
	}
	s.ConfigureLogger()
	if err := server.Run(s); err != nil {
		server.PrintAndDie(err.Error())
	}
	s.WaitForShutdown()
}
