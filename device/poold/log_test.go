package poold

import (
	"log"
	"strings"
	"sync"
	"testing"
)

// logBuf collects a server's log for assertions and echoes it to the test.
type logBuf struct {
	t  *testing.T
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	return len(p), nil
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testLogger(t *testing.T) *log.Logger { return log.New(&logBuf{t: t}, "poold: ", 0) }
