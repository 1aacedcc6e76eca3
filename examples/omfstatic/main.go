// Command omfstatic serves the files of a directory over HTTP straight out
// of their mapping: on the appliance's pmem (a DAX filesystem) the bytes go
// from persistent memory to the socket without a read(2) copy into a
// buffer first; elsewhere from the page cache the same way. It is the
// example service of package omf.
//
//	GET /<name>    the file, with Range, If-Modified-Since and a
//	               Content-Type from the name (http.ServeContent); 404 for
//	               what is not a regular file under -root, 500 naming the
//	               file if it was truncated while being served
//
// Files stay open and mapped between requests; each request asks the
// kernel once (a stat through os.Root, which also keeps names inside
// -root) whether the file was replaced, and opens it again if so.
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

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/internal/httpsrv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(cli.ExitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr, "omfstatic"))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("omfstatic", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", ":8080", "TCP `address` to serve HTTP on")
	root := fs.String("root", "/nv/www", "`directory` whose files are served (on pmem: a DAX mount)")
	fs.Usage = func() {
		fmt.Fprintf(stdout, `Usage: omfstatic [-listen ADDR] [-root DIR]

Serves the regular files under -root over HTTP from their mapping (package
omf): from persistent memory on a DAX mount, from the page cache elsewhere.

Flags:
`)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fmt.Fprintf(stdout, `
Examples:
  omfstatic -root /nv/www -listen :8080
  curl -r 0-99 http://127.0.0.1:8080/index.html
`)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	s, err := newServer(*root)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("-listen %s: %w", *listen, err)
	}
	fmt.Fprintf(stderr, "omfstatic: serving %s on %s\n", *root, ln.Addr())
	srv := httpsrv.New(s, httpsrv.Default)
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
