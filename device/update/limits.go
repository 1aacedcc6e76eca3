package update

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Limits bound what clients can hold of PID 1 through the endpoint: open
// connections (file descriptors), the time a connection may sit idle or a
// body may stall, the time an answer may wait to be taken, and the memory
// an upload is received through. A zero field takes its default.
type Limits struct {
	// MaxConns bounds the open connections; one more is closed at once
	// (plain HTTP: after a 503), never queued. Default 16.
	MaxConns int
	// HeaderTimeout bounds a request's headers, and the TLS handshake.
	// Default 10 s.
	HeaderTimeout time.Duration
	// IdleTimeout closes a kept-alive connection with no request.
	// Default 30 s.
	IdleTimeout time.Duration
	// Stall and Progress are a body's minimum rate: Progress bytes must
	// arrive within Stall of the endpoint waiting for them, or the request
	// ends (408); the time the endpoint itself spends (a store write) does
	// not count. Defaults 30 s and 1 MiB (about 35 KB/s).
	Stall    time.Duration
	Progress int64
	// WriteTimeout bounds an answer, from its first byte: a client that
	// does not read it loses the connection. Default 30 s.
	WriteTimeout time.Duration
	// UploadBuffer is the memory a deploy's text is received through
	// before each write into the store (a multiple of 4 KiB). Default
	// 1 MiB.
	UploadBuffer int
}

// Defaults of Limits.
const (
	defaultMaxConns      = 16
	defaultHeaderTimeout = 10 * time.Second
	defaultIdleTimeout   = 30 * time.Second
	defaultStall         = 30 * time.Second
	defaultProgress      = 1 << 20
	defaultWriteTimeout  = 30 * time.Second
	defaultUploadBuffer  = 1 << 20
	// maxHeaderBytes bounds a request's headers: the protocol's are a few
	// hundred bytes; net/http's default would let each connection hold 1 MiB.
	maxHeaderBytes = 64 << 10
)

func (l Limits) withDefaults() Limits {
	or := func(v, d time.Duration) time.Duration {
		if v <= 0 {
			return d
		}
		return v
	}
	if l.MaxConns <= 0 {
		l.MaxConns = defaultMaxConns
	}
	l.HeaderTimeout = or(l.HeaderTimeout, defaultHeaderTimeout)
	l.IdleTimeout = or(l.IdleTimeout, defaultIdleTimeout)
	l.Stall = or(l.Stall, defaultStall)
	l.WriteTimeout = or(l.WriteTimeout, defaultWriteTimeout)
	if l.Progress <= 0 {
		l.Progress = defaultProgress
	}
	if l.UploadBuffer <= 0 {
		l.UploadBuffer = defaultUploadBuffer
	}
	// Whole pages, so the zero pages of a text are found at page offsets.
	l.UploadBuffer = (l.UploadBuffer + pageSize - 1) / pageSize * pageSize
	return l
}

// limitListener accepts at most cap(slots) connections at a time; one
// more is turned away at once: closing rather than queueing keeps Accept
// going and tells the client why.
type limitListener struct {
	net.Listener
	slots chan struct{}
	// reject is written to a connection turned away (nil: closed
	// silently), by at most cap(turning) goroutines at a time; beyond
	// them it is closed silently too.
	reject  []byte
	turning chan struct{}
}

func newLimitListener(l net.Listener, n int, reject []byte) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), reject: reject, turning: make(chan struct{}, 4)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
		default:
		}
		if l.reject == nil {
			c.Close()
			continue
		}
		select {
		case l.turning <- struct{}{}:
			go func() {
				defer func() { <-l.turning }()
				turnAway(c, l.reject)
			}()
		default:
			c.Close()
		}
	}
}

// turnAway answers c with msg and closes it, within a second. The request
// the client sent meanwhile is read first: a socket closed with unread
// bytes is reset, and the reset can destroy the answer before the client
// reads it.
func turnAway(c net.Conn, msg []byte) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(msg); err != nil {
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// limitConn gives its slot back when it is closed, once.
type limitConn struct {
	net.Conn
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// busyAnswer is what a plain-HTTP connection over MaxConns gets.
func busyAnswer(n int) []byte {
	msg := "the update endpoint has " + strconv.Itoa(n) + " connections open, its most; try again in a moment\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(msg)) + "\r\n\r\n" + msg)
}

// stallError ends a body that did not keep the minimum rate.
type stallError struct {
	progress int64
	stall    time.Duration
	err      error // the read's own error, if it timed out
}

func (e *stallError) Error() string {
	return fmt.Sprintf("the upload stalled: less than %d bytes arrived in %v of waiting", e.progress, e.stall)
}

func (e *stallError) Unwrap() error { return e.err }

// isStall says whether err ended a body for its rate.
func isStall(err error) bool {
	var se *stallError
	return errors.As(err, &se)
}

// progressBody is a request body with a minimum rate: each read's deadline
// is what is left of Stall since the last Progress bytes, counting only
// the time spent waiting in reads. At EOF the deadline is cleared, so a
// long answer (a deploy's trial) is not cut by it.
type progressBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	lim    Limits
	waited time.Duration
	got    int64
}

func (b *progressBody) Read(p []byte) (int, error) {
	left := b.lim.Stall - b.waited
	if left <= 0 {
		return 0, &stallError{progress: b.lim.Progress, stall: b.lim.Stall}
	}
	start := time.Now()
	b.rc.SetReadDeadline(start.Add(left))
	n, err := b.ReadCloser.Read(p)
	b.waited += time.Since(start)
	if b.got += int64(n); b.got >= b.lim.Progress {
		b.got, b.waited = 0, 0
	}
	var ne net.Error
	switch {
	case err == io.EOF:
		b.rc.SetReadDeadline(time.Time{})
	case errors.As(err, &ne) && ne.Timeout():
		err = &stallError{progress: b.lim.Progress, stall: b.lim.Stall, err: err}
	}
	return n, err
}

// deadlineWriter sets the connection's write deadline when the answer
// starts: a handler may run long (a deploy's trial) before it writes.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
}

func (w *deadlineWriter) start() {
	if !w.started {
		w.started = true
		w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
}

func (w *deadlineWriter) WriteHeader(code int) {
	// 1xx answers are not the answer.
	if code >= 200 {
		w.start()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
