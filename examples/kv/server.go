package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// timeouts bound how long a client may hold what kv gives a request: a
// connection, and for a PUT the value's bytes reserved in -inflight. A
// client that announced a 1 MiB value and sent nothing held its
// reservation for good, and seventeen of them made every later PUT a 503.
type timeouts struct {
	// header bounds the request line and headers (-header-timeout).
	header time.Duration
	// body bounds a request's body, counted from the end of its headers,
	// and the answer: what the handler streams (a GET's value) in the
	// same time, what is still buffered when it returns (a PUT's 204 or
	// 408) in as long again from then (-body-timeout). A body that is
	// late is let go: its PUT is answered 408 and gives its reservation
	// back.
	body time.Duration
	// idle bounds a kept-alive connection's wait for its next request
	// (-idle-timeout).
	idle time.Duration
}

// Defaults of the timeouts: a value of 1 MiB arrives in a minute at
// 17.5 KiB/s.
var defaultTimeouts = timeouts{header: 10 * time.Second, body: time.Minute, idle: 2 * time.Minute}

// newServer is kv's HTTP server for st: handler with the timeouts. The
// deadlines are the connection's, so each request sets its own: a write
// deadline outlives the request that set it (http.Server renews only the
// read deadline, for the next request's headers).
func newServer(st store, inflight int64, t timeouts) *http.Server {
	h := handler(st, inflight)
	return &http.Server{
		ReadHeaderTimeout: t.header,
		IdleTimeout:       t.idle,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			deadline := time.Now().Add(t.body)
			rc.SetReadDeadline(deadline)
			rc.SetWriteDeadline(deadline)
			h.ServeHTTP(w, r)
			// An answer to a body (204, 408, an error) is still in the
			// server's buffer: it is sent from here, in a time of its
			// own. (Wrapping r.Body to learn when the body ended instead
			// would hide from net/http that the body was left unread:
			// it then reads it before a 503 is sent.)
			rc.SetWriteDeadline(time.Now().Add(t.body))
		}),
	}
}

// isTimeout says whether err is a deadline's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// kvListener is ln for kv's server: a request whose path has a % that
// starts no escape of two hex digits is answered with kv's own rule, which
// names the key, not with net/http's bare "400 Bad Request" (the server
// refuses such a request line before any handler sees it, and has no hook
// for the answer). Only that answer changes: the bytes a request sends
// reach the server untouched.
func kvListener(ln net.Listener) net.Listener { return escapeListener{ln} }

type escapeListener struct{ net.Listener }

func (l escapeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &escapeConn{Conn: c}, nil
}

// goBadRequest is what net/http writes, in one write, when it cannot
// parse a request (server.go, conn.serve); a request line whose URL does
// not parse gets it.
const goBadRequest = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"

// maxRequestLine bounds the request line an escapeConn keeps: the longest
// a key kv takes can have (maxKey bytes, each escaped as %XX) and room for
// the method, a query and the version.
const maxRequestLine = 3*maxKey + 1024

// escapeConn keeps the first line read since its last write: the request
// line of the request being read (a client sends the next request once it
// has the answer to the last). When the server answers goBadRequest and
// that line has a bad escape, kv's answer replaces it.
type escapeConn struct {
	net.Conn
	mu    sync.Mutex // Read and Write run on different goroutines
	line  []byte
	whole bool // line ends at a '\n'
	full  bool // line is longer than maxRequestLine: not kept
}

func (c *escapeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	if got := p[:n]; n > 0 && !c.whole && !c.full {
		if i := bytes.IndexByte(got, '\n'); i >= 0 {
			got, c.whole = got[:i], true
		}
		if len(c.line)+len(got) > maxRequestLine {
			c.full, c.line = true, nil
		} else {
			c.line = append(c.line, got...)
		}
	}
	c.mu.Unlock()
	return n, err
}

func (c *escapeConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	line, whole := c.line, c.whole
	c.line, c.whole, c.full = nil, false, false
	c.mu.Unlock()
	if whole && string(p) == goBadRequest {
		if msg := badEscape(string(bytes.TrimSuffix(line, []byte("\r")))); msg != "" {
			if _, err := io.WriteString(c.Conn, strings.TrimSuffix(goBadRequest, "400 Bad Request")+msg+"\n"); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return c.Conn.Write(p)
}

// badEscape is kv's answer to the request line line when its target does
// not parse as a URL and is a key's: the rule the key breaks (a bad escape,
// or a control character, which net/http refuses too); "" otherwise.
func badEscape(line string) string {
	_, rest, ok := strings.Cut(line, " ")
	target, _, ok2 := strings.Cut(rest, " ")
	if !ok || !ok2 {
		return ""
	}
	if _, err := url.ParseRequestURI(target); err == nil {
		return ""
	}
	p, _, _ := strings.Cut(target, "?")
	if key, ok := strings.CutPrefix(p, "/kv/"); ok {
		if _, err := parseKey(key); err != nil {
			return err.Error()
		}
	}
	return ""
}
