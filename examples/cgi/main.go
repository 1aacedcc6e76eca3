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

	"github.com/nvboot/nvboot/pool"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "cgi: %v\n", err)
		os.Exit(1)
	}
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	var g Gateway
	switch {
	case *local && *handler != "" && *poolName == "":
		sock, stop, err := localPool(*handler, *reuse, stderr)
		if err != nil {
			return err
		}
		defer stop()
		g = Gateway{Start: PoolStarter(&pool.Client{Socket: sock, KeepConns: true}, localName), Argv0: *handler, Stderr: os.Stderr}
	case *poolName != "" && *handler == "":
		g = Gateway{Start: PoolStarter(&pool.Client{Socket: *socket, KeepConns: true}, *poolName), Argv0: *poolName, Stderr: os.Stderr}
	case *handler != "" && *poolName == "":
		g = Gateway{Start: ExecStarter(*handler), Argv0: *handler, Stderr: os.Stderr}
	default:
		fs.Usage()
		return errors.New("give one of -handler and -pool")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "cgi: serving on %s\n", ln.Addr())
	srv := &http.Server{Handler: &g}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
