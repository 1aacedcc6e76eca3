// Command kv is the nvboot demo service: an HTTP key-value store whose state
// survives power cuts. The state is a persistent heap (package pheap) used in
// place, nothing loaded at start; -state keeps it in an fsync'ed log instead.
//
//	PUT    /kv/<key>     body = value; 204 once it is durable; 413 past
//	                     1 MiB, 507 when the store is full, 503 with
//	                     Retry-After when -inflight bytes of values are
//	                     being received
//	GET    /kv/<key>     200 with the value, or 404 (HEAD: no body); 500
//	                     naming the key if the stored value fails its
//	                     checksum
//	DELETE /kv/<key>     204, or 404
//	GET    /kv?prefix=P  the keys starting with P, one a line; when stored
//	                     keys are damaged (they fail their checksum, so
//	                     they can be neither named nor compared with P),
//	                     500 with X-Kv-Damaged: N and a first line saying
//	                     N were left out, then the keys that read
//	GET    /stats        JSON: keys, keys_damaged, heap size and use, what
//	                     can still be allocated (heap_free,
//	                     heap_largest_alloc), mode, "check": "ok", the
//	                     failure, or "off" (see -check-on-open)
//	GET    /healthz      200 "ok" (readiness)
//
// A key is /-separated segments of up to 64 KiB in all, none empty, "." or
// "..", of UTF-8 without control characters, a % only as an escape %XX
// (key.go has the grammar); a key outside it is a 400 that says why. No
// request is redirected.
//
// A client holds what kv gives it for a bounded time: its request's
// headers must arrive within -header-timeout, a PUT's value within
// -body-timeout (else 408, and the bytes it reserved of -inflight are
// given back), an answer be taken within -body-timeout, and a kept-alive
// connection is closed after -idle-timeout without a request.
//
// kv listens only once its state is open, so an open port means it can
// serve (nvinit's WaitFor tcp:PORT relies on it); a state it cannot open
// fails the start before the port was ever open.
//
// Opening the heap costs the same for any amount of data (no loading).
// -check-on-open adds pheap's full check at start, which reads every block
// and verifies every value's checksum (5 ms for a 64 MiB heap full of
// 4000-byte values on the development machine, 29 ms for one full of
// 390,000 small objects, more under emulation) and accounts for every live
// object; nvboot powercut builds its image with it. A heap that fails the check is still served, so that the
// failure can be read in /stats.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/internal/cli"
)

const (
	maxKey   = 64 << 10 // bytes of a key
	maxValue = 1 << 20  // bytes of a value

	// defaultInflight is -inflight's default: the bytes of request bodies
	// held at once, 16 of the largest values (a 128 MiB guest was OOM
	// with 200 of them).
	defaultInflight = 16 << 20
)

// version names the build, in GET /healthz's X-Kv-Version: set with
// go build -ldflags=-X=main.version=V, so a deploy can be told apart.
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(cli.ExitCode(run(ctx, os.Args[1:], os.Stderr), os.Stderr, "kv"))
}

// run is kv with its command line; it serves until ctx is done (main:
// SIGTERM or an interrupt), then shuts down and returns nil.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("kv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", ":8080", "TCP `address` to serve HTTP on")
	heapPath := fs.String("heap", "/nv/state/kv.heap", "persistent heap `file` holding the state (created if absent)")
	size := sizeFlag(64 << 20)
	fs.Var(&size, "size", "`bytes` of a heap created by -heap (suffix KiB, MiB, GiB)")
	state := fs.String("state", "", "keep the state in this append-only log `file` instead of a heap")
	inflight := sizeFlag(defaultInflight)
	fs.Var(&inflight, "inflight", "`bytes` of request bodies held in memory at once (suffix KiB, MiB, GiB); a PUT past it gets 503 and Retry-After")
	headerTimeout := fs.Duration("header-timeout", defaultTimeouts.header, "how long a request's line and headers may take to arrive")
	bodyTimeout := fs.Duration("body-timeout", defaultTimeouts.body, "how long a request's body may take to arrive (a late PUT gets 408 and gives back what it reserved of -inflight), and an answer to be taken")
	idleTimeout := fs.Duration("idle-timeout", defaultTimeouts.idle, "how long a kept-alive connection may wait for its next request")
	checkOnOpen := fs.Bool("check-on-open", false, "check the whole heap at start (every block, bin and counter, every value's checksum; leaks) and report it in GET /stats; its time grows with the data")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: kv [-listen ADDR] [-inflight 16MiB] [-header-timeout 10s] [-body-timeout 1m] [-idle-timeout 2m]
          [-heap FILE [-size 64MiB] [-check-on-open] | -state FILE]

An HTTP key-value store whose every acknowledged write survives a power cut
(the nvboot demo service). PUT /kv/KEY stores the body and answers 204 once
it is durable; GET (HEAD) /kv/KEY, DELETE /kv/KEY, GET /kv?prefix=P,
GET /stats, GET /healthz. A KEY is /-separated segments, none empty, "."
or "..", of UTF-8 without control characters, 64 KiB at most (%%2F is
refused: / is written as it is; a %% is written %%25); a value is 1 MiB at
most. kv listens once its state is open; a client that is too slow is let
go (-header-timeout, -body-timeout, -idle-timeout).

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, `
Examples:
  kv -listen 127.0.0.1:8080 -heap /tmp/kv.heap -size 16MiB
  kv -listen 127.0.0.1:8080 -state /tmp/kv.log
  kv -listen 127.0.0.1:8080 -heap /tmp/kv.heap -check-on-open
  curl -X PUT --data-binary hello localhost:8080/kv/greeting
  curl localhost:8080/kv/greeting
`)
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return cli.Usagef("kv takes no arguments, got %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["state"] {
		if *state == "" {
			return cli.Usagef("-state: want a file")
		}
		for _, heapOnly := range []string{"heap", "size", "check-on-open"} {
			if set[heapOnly] {
				return cli.Usagef("-%s is for a heap, -state keeps the state in a log instead: give one or the other", heapOnly)
			}
		}
	} else if *heapPath == "" {
		return cli.Usagef("-heap: want a file")
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"header-timeout", *headerTimeout}, {"body-timeout", *bodyTimeout}, {"idle-timeout", *idleTimeout}} {
		if f.d <= 0 {
			return cli.Usagef("-%s %v: want a duration above 0, such as 30s", f.name, f.d)
		}
	}
	if inflight < maxValue {
		return cli.Usagef("-inflight %s: want at least %s, the largest value, or no PUT of it could ever be stored", inflight.String(), sizeText(maxValue))
	}
	// A bad or busy -listen must leave no new state file behind (a heap is
	// 64 MiB), so the address is tried before the state is opened; but kv
	// listens only once the state is open: nvinit's WaitFor tcp:PORT takes
	// the first accepted connection for "ready", and a kv that listened and
	// then failed to open a damaged heap looked ready at every restart.
	if err := tryListen(*listen); err != nil {
		return err
	}
	var st store
	where := *heapPath
	if *state != "" {
		where = *state
		ls, err := openLogStore(*state)
		if err != nil {
			return err
		}
		if ls.torn != "" {
			fmt.Fprintf(stderr, "kv: state file %s: %s\n", *state, ls.torn)
		}
		st = ls
	} else {
		hs, err := openHeapStore(*heapPath, int64(size), *checkOnOpen)
		if err != nil {
			return err
		}
		if c := hs.check; c.ran {
			if c.err != nil {
				fmt.Fprintf(stderr, "kv: heap check FAILED in %v (serving anyway; see /stats): %v\n", c.took, c.err)
			} else {
				fmt.Fprintf(stderr, "kv: heap check ok in %v: %d live objects, all reachable\n", c.took, c.live)
			}
		}
		st = hs
	}
	defer st.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("-listen %s: %w", *listen, err)
	}
	defer ln.Close()
	srv := newServer(st, int64(inflight), timeouts{header: *headerTimeout, body: *bodyTimeout, idle: *idleTimeout})
	go func() { <-ctx.Done(); srv.Shutdown(context.Background()) }()
	keys, damaged, err := st.Keys("")
	if err != nil {
		// Served all the same, as a heap that fails -check-on-open is:
		// the listing and /stats say what is wrong.
		fmt.Fprintf(stderr, "kv: listing the keys: %v\n", err)
	}
	fmt.Fprintf(stderr, "kv: serving on %s, state %s (%d keys, %d damaged)\n", ln.Addr(), where, len(keys)+damaged, damaged)
	if err := srv.Serve(kvListener(ln)); err != http.ErrServerClosed {
		return err
	}
	return nil
}
