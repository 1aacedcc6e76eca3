package cli

import (
	"fmt"
	"io"
	"time"
)

// Progress prints a long command's progress lines, each stamped with the
// seconds since the command started ("[  12.3s] building kv"), to its
// stderr: stdout stays for the result.
type Progress struct {
	w     io.Writer
	start time.Time
}

// NewProgress starts the clock of the progress lines written to w.
func NewProgress(w io.Writer) *Progress { return &Progress{w: w, start: time.Now()} }

// Printf prints one line.
func (p *Progress) Printf(format string, args ...any) {
	fmt.Fprintf(p.w, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// Writer is where the lines go: a child process's own progress can go
// there too.
func (p *Progress) Writer() io.Writer { return p.w }
