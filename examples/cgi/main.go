// Command cgi is an HTTP gateway that runs a handler program per request
// (CGI/1.1), either with os/exec (a fork and exec per request) or through
// poold (a parked process activated per request), to show the difference.
//
//	cgi -listen :8080 -handler /usr/bin/handler              # os/exec
//	cgi -listen :8080 -pool handler -socket /run/poold.sock  # poold
//	cgi -listen :8080 -handler /usr/bin/handler -local-pool -reuse 1000
//
// The last runs a poold inside the gateway; -reuse N lets one handler
// process serve N requests (the handler calls pool.Reusable), which is what
// makes pooling pay on a machine with few cores: a fresh process per request
// costs the same CPU whether it was forked ahead or not.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/nvboot/nvboot/device/poold"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/internal/httpsrv"
	"github.com/nvboot/nvboot/pool"
)

func main() {
	os.Exit(cli.ExitCode(run(os.Args[1:], os.Stderr), os.Stderr, "cgi"))
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("cgi", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve HTTP on")
	handler := fs.String("handler", "", "the handler program, run with os/exec per request")
	poolName := fs.String("pool", "", "the handler's pool program name in poold: spawn through poold instead of os/exec")
	socket := fs.String("socket", "", "poold's socket (default $"+pool.EnvSocket+", else "+pool.DefaultSocket+")")
	local := fs.Bool("local-pool", false, "with -handler: run a poold for it inside the gateway and spawn through it")
	reuse := fs.Int("reuse", 1, "with -local-pool: requests one handler process serves (poold's MaxUses; 1: a fresh process per request, answered as soon as the handler's main returns if it calls pool.Reusable; above 1 the handler must call pool.Reusable)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: cgi [-listen ADDR] (-handler PATH [-local-pool [-reuse N]] | -pool NAME [-socket PATH])

An HTTP gateway that runs a handler program per request (CGI/1.1: the request
in the environment, the body on stdin, CGI headers and body on stdout), with
os/exec (-handler) or by activating a process poold parked (-pool, or
-local-pool for a poold inside the gateway). With -reuse N a handler process
serves up to N requests: its main runs again per request, its package
variables keep their state (see pool.Reusable); the best mode on few cores.

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprint(stderr, `
Examples:
  cgi -listen :8080 -handler ./handler
  cgi -listen :8080 -handler ./handler -local-pool -reuse 1000
  poold -config pools.json & cgi -listen :8080 -pool handler
  curl 'http://127.0.0.1:8080/hello?name=x'
`)
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return cli.Usagef("cgi takes no arguments, got %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *handler == "" && *poolName == "":
		fs.Usage()
		return cli.Usagef("give one of -handler and -pool")
	case *handler != "" && *poolName != "":
		return cli.Usagef("give one of -handler and -pool, not both")
	case *local && *poolName != "":
		return cli.Usagef("-local-pool runs a poold for -handler; with -pool the program is a running poold's: give one or the other")
	case set["reuse"] && !*local:
		return cli.Usagef("-reuse is for -local-pool")
	case *reuse < 1:
		return cli.Usagef("-reuse %d: want at least 1", *reuse)
	case set["socket"] && *poolName == "":
		return cli.Usagef("-socket is poold's, for -pool")
	}
	if *handler != "" {
		// Checked now, not by every request failing with 502.
		if err := poold.CheckExecutable(*handler); err != nil {
			return fmt.Errorf("-handler %s: %w", *handler, err)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	var g Gateway
	switch {
	case *local:
		sock, stop, err := localPool(*handler, *reuse, stderr)
		if err != nil {
			return err
		}
		defer stop()
		g = Gateway{Start: PoolStarter(&pool.Client{Socket: sock, KeepConns: true}, localName), Argv0: *handler, Stderr: os.Stderr}
	case *poolName != "":
		g = Gateway{Start: PoolStarter(&pool.Client{Socket: *socket, KeepConns: true}, *poolName), Argv0: *poolName, Stderr: os.Stderr}
	default:
		g = Gateway{Start: ExecStarter(*handler), Argv0: *handler, Stderr: os.Stderr}
	}
	fmt.Fprintf(stderr, "cgi: serving on %s\n", ln.Addr())
	srv := httpsrv.New(&g, httpsrv.Default)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
