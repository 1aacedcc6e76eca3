package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/nvboot/nvboot/pool"
)

// Starter runs the handler with argv, env and descriptors 0, 1, 2 and returns
// a function that waits for it.
type Starter func(ctx context.Context, argv, env []string, files []*os.File) (wait func() error, err error)

// ExecStarter starts path with os/exec: a fork and exec per request.
func ExecStarter(path string) Starter {
	return func(ctx context.Context, argv, env []string, files []*os.File) (func() error, error) {
		cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Stdout: files[1], Stderr: files[2]}
		if files[0] != nil {
			cmd.Stdin = files[0]
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting %s: %w", path, err)
		}
		return cmd.Wait, nil
	}
}

// PoolStarter activates a parked process of the pool program name.
func PoolStarter(c *pool.Client, name string) Starter {
	return func(ctx context.Context, argv, env []string, files []*os.File) (func() error, error) {
		p, err := c.Spawn(ctx, name, pool.Attr{Argv: argv, Env: env, Dir: "/", Files: files})
		if err != nil {
			return nil, err
		}
		return func() error {
			st, err := p.Wait()
			if err == nil && !st.Success() {
				err = fmt.Errorf("handler %s", st)
			}
			return err
		}, nil
	}
}

// Gateway is a CGI/1.1 gateway: each request runs the handler once, with the
// request in its environment and body on stdin, and its output (CGI headers,
// a blank line, the body) is the response.
type Gateway struct {
	Start  Starter
	Argv0  string
	Stderr *os.File
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	stdin, err := bodyFile(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if stdin != nil {
		defer stdin.Close()
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer outR.Close()
	wait, err := g.Start(r.Context(), []string{g.Argv0}, cgiEnv(r), []*os.File{stdin, outW, g.Stderr})
	outW.Close()
	if err != nil {
		g.logf("%s %s: %v", r.Method, r.URL, err)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	relayErr := relay(w, outR)
	io.Copy(io.Discard, outR)
	if err := wait(); err != nil && relayErr != nil {
		g.logf("%s %s: %v; %v", r.Method, r.URL, relayErr, err)
		http.Error(w, err.Error(), http.StatusBadGateway)
	}
}

// logf reports a failed request on the gateway's stderr: the client only
// sees 502.
func (g *Gateway) logf(format string, args ...any) {
	if g.Stderr != nil {
		fmt.Fprintf(g.Stderr, "cgi: "+format+"\n", args...)
	}
}

// bodyFile gives the request body as a file: nil (/dev/null) when empty,
// else a pipe fed by a goroutine.
func bodyFile(r *http.Request) (*os.File, error) {
	if r.ContentLength == 0 {
		return nil, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	go func() { io.Copy(pw, r.Body); pw.Close() }()
	return pr, nil
}

// relay parses the handler's CGI headers and copies the response.
func relay(w http.ResponseWriter, out io.Reader) error {
	br := bufio.NewReader(out)
	h, err := textproto.NewReader(br).ReadMIMEHeader()
	if err != nil {
		return fmt.Errorf("handler output: %w", err)
	}
	code := http.StatusOK
	if s := h.Get("Status"); s != "" {
		n, err := strconv.Atoi(strings.Fields(s)[0])
		if err != nil {
			return fmt.Errorf("handler Status %q: %w", s, err)
		}
		code = n
		h.Del("Status")
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
	_, err = io.Copy(w, br)
	return err
}

func cgiEnv(r *http.Request) []string {
	env := []string{
		"GATEWAY_INTERFACE=CGI/1.1",
		"SERVER_SOFTWARE=nvboot-cgi",
		"SERVER_PROTOCOL=" + r.Proto,
		"REQUEST_METHOD=" + r.Method,
		"SCRIPT_NAME=",
		"PATH_INFO=" + r.URL.Path,
		"QUERY_STRING=" + r.URL.RawQuery,
		"REMOTE_ADDR=" + r.RemoteAddr,
		"PATH=/usr/bin:/bin",
	}
	if r.ContentLength > 0 {
		env = append(env, "CONTENT_LENGTH="+strconv.FormatInt(r.ContentLength, 10), "CONTENT_TYPE="+r.Header.Get("Content-Type"))
	}
	for k, v := range r.Header {
		env = append(env, "HTTP_"+strings.ToUpper(strings.ReplaceAll(k, "-", "_"))+"="+strings.Join(v, ", "))
	}
	return env
}
