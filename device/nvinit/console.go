package nvinit

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nvboot/nvboot/device/bootprof"
)

// console is the serial console: nvinit's log, the markers and every
// service's output share it, one whole line at a time so a marker is never
// split by a service's bytes (the host parses it line by line).
type console struct {
	W      io.Writer
	Uptime func() time.Duration // nil: CLOCK_BOOTTIME
	mu     sync.Mutex
}

// Line writes one line.
func (c *console) Line(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	io.WriteString(c.W, s+"\n")
}

// Mark prints the marker line of stage name (with an optional argument,
// the service name), stamped with Uptime.
func (c *console) Mark(name, arg string) { c.marker().Mark(name, arg) }

// marker prints marks on c.
func (c *console) marker() bootprof.Marker {
	return bootprof.Marker{Line: c.Line, Uptime: c.Uptime}
}

// Logf writes "nvinit: " and the message.
func (c *console) Logf(format string, args ...any) {
	c.Line("nvinit: " + fmt.Sprintf(format, args...))
}

// Prefixed returns a writer that puts "<prefix>: " before every line it
// passes to the console, but for a line that starts with it already: a Go
// command names itself in its messages ("kv: serving on :8080"), and the
// console showed "kv: kv: serving on :8080". Close flushes a last
// unterminated line.
func (c *console) Prefixed(prefix string) io.WriteCloser {
	return &prefixWriter{c: c, prefix: prefix + ": "}
}

type prefixWriter struct {
	c      *console
	prefix string
	buf    []byte
}

// maxLine bounds a line kept waiting for its newline: a service writing
// megabytes without one must not grow nvinit's memory.
const maxLine = 4096

func (p *prefixWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			take := min(len(b), maxLine-len(p.buf))
			p.buf = append(p.buf, b[:take]...)
			if len(p.buf) >= maxLine {
				p.flush()
			}
			b = b[take:]
			continue
		}
		p.buf = append(p.buf, b[:i]...)
		p.flush()
		b = b[i+1:]
	}
	return n, nil
}

func (p *prefixWriter) flush() {
	line := string(bytes.TrimSuffix(p.buf, []byte("\r")))
	if !strings.HasPrefix(line, p.prefix) {
		line = p.prefix + line
	}
	p.c.Line(line)
	p.buf = p.buf[:0]
}

func (p *prefixWriter) Close() error {
	if len(p.buf) > 0 {
		p.flush()
	}
	return nil
}

// tailLines keeps the last lines a service wrote (tailKeep of them, each cut
// at tailWidth bytes), for the line that says why it is not restarted. Its
// writer is the output's copier; its reader Run's goroutine.
type tailLines struct {
	mu      sync.Mutex
	lines   []string
	partial []byte // the last line, until its newline
}

const (
	tailKeep  = 3
	tailWidth = 160
)

func (t *tailLines) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			t.partial = append(t.partial, b[:min(len(b), tailWidth-min(len(t.partial), tailWidth))]...)
			break
		}
		t.partial = append(t.partial, b[:min(i, tailWidth-min(len(t.partial), tailWidth))]...)
		t.add(string(bytes.TrimSuffix(t.partial, []byte("\r"))))
		t.partial = t.partial[:0]
		b = b[i+1:]
	}
	return n, nil
}

func (t *tailLines) add(l string) {
	if len(t.lines) == tailKeep {
		t.lines = append(t.lines[:0], t.lines[1:]...)
	}
	t.lines = append(t.lines, l)
}

// last returns the kept lines, an unterminated last one included.
func (t *tailLines) last() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]string(nil), t.lines...)
	if len(t.partial) > 0 {
		out = append(out[max(0, len(out)-tailKeep+1):], string(t.partial))
	}
	return out
}
