// Command kv is the nvboot demo service: an HTTP key-value store whose state
// survives power cuts. The state is a persistent heap (package pheap) used in
// place, nothing loaded at start; -state keeps it in an fsync'ed log instead.
//
//	PUT    /kv/<key>     body = value; 204 once it is durable (keys up to
//	                     64 KiB, values up to 1 MiB)
//	GET    /kv/<key>     200 with the value, or 404; 500 naming the key if
//	                     the stored value fails its checksum
//	DELETE /kv/<key>     204, or 404
//	GET    /kv?prefix=P  the keys starting with P, one a line
//	GET    /stats        JSON: keys, heap size and use, what can still be
//	                     allocated (heap_free, heap_largest_alloc), mode, "check":
//	                     "ok", the failure, or "off" (see -check-on-open)
//	GET    /healthz      200 "ok" (readiness)
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
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nvboot/nvboot/internal/cli"
)

const (
	maxKey   = 64 << 10 // bytes of a key
	maxValue = 1 << 20  // bytes of a value
)

func main() {
	os.Exit(cli.ExitCode(run(os.Args[1:], os.Stderr), os.Stderr, "kv"))
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("kv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", ":8080", "TCP `address` to serve HTTP on")
	heapPath := fs.String("heap", "/nv/state/kv.heap", "persistent heap `file` holding the state (created if absent)")
	size := sizeFlag(64 << 20)
	fs.Var(&size, "size", "`bytes` of a heap created by -heap (suffix KiB, MiB, GiB)")
	state := fs.String("state", "", "keep the state in this append-only log `file` instead of a heap")
	checkOnOpen := fs.Bool("check-on-open", false, "check the whole heap at start (every block, bin and counter, every value's checksum; leaks) and report it in GET /stats; its time grows with the data")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: kv [-listen ADDR] [-heap FILE [-size 64MiB] [-check-on-open] | -state FILE]

An HTTP key-value store whose every acknowledged write survives a power cut
(the nvboot demo service). PUT /kv/KEY stores the body and answers 204 once
it is durable; GET /kv/KEY, DELETE /kv/KEY, GET /kv?prefix=P, GET /stats,
GET /healthz.

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
	// The listener first: a bad -listen leaves no new state file behind.
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	defer ln.Close()
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
	srv := &http.Server{Handler: handler(st)}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() { <-ctx.Done(); srv.Shutdown(context.Background()) }()
	fmt.Fprintf(stderr, "kv: serving on %s, state %s (%d keys)\n", ln.Addr(), where, len(st.Keys("")))
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

func handler(st store) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st.Stats())
	})
	mux.HandleFunc("GET /kv", func(w http.ResponseWriter, r *http.Request) {
		for _, k := range st.Keys(r.URL.Query().Get("prefix")) {
			fmt.Fprintln(w, k)
		}
	})
	mux.HandleFunc("/kv/{key...}", func(w http.ResponseWriter, r *http.Request) {
		key := r.PathValue("key")
		if key == "" || strings.ContainsAny(key, "\n") {
			http.Error(w, "bad key", http.StatusBadRequest)
			return
		}
		if len(key) > maxKey {
			http.Error(w, fmt.Sprintf("key of %d bytes: want at most %d", len(key), maxKey), http.StatusBadRequest)
			return
		}
		switch r.Method {
		case http.MethodPut:
			val, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxValue))
			if err != nil {
				http.Error(w, "value too large or unreadable: "+err.Error(), http.StatusRequestEntityTooLarge)
				return
			}
			if err := st.Put(key, val); err != nil {
				http.Error(w, "not stored: "+err.Error(), http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		case http.MethodGet:
			switch v, err := st.Get(key); {
			case errors.Is(err, errNotFound):
				http.NotFound(w, r)
			case err != nil:
				// The request was right and the key exists, but the server
				// cannot give its value: a server fault (500), and not a
				// passing one (503). The message names the key; the value's
				// bytes, which failed their checksum, are never sent.
				http.Error(w, err.Error(), http.StatusInternalServerError)
			default:
				w.Write(v)
			}
		case http.MethodDelete:
			switch err := st.Delete(key); {
			case errors.Is(err, errNotFound):
				http.NotFound(w, r)
			case err != nil:
				http.Error(w, err.Error(), http.StatusInternalServerError)
			default:
				w.WriteHeader(http.StatusNoContent)
			}
		default:
			w.Header().Set("Allow", "GET, PUT, DELETE")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
	return mux
}
