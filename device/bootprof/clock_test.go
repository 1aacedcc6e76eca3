package bootprof

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvboot/nvboot/format/bootmark"
	"github.com/nvboot/nvboot/internal/cpucounter"
)

func TestMarkTSC(t *testing.T) {
	if !cpucounter.Available {
		t.Skip("no TSC on this architecture")
	}
	var out bytes.Buffer
	before := cpucounter.Read()
	Marker{Line: func(s string) { out.WriteString(s + "\n") }, Uptime: func() time.Duration { return 1500 * time.Microsecond }}.tsc()
	m, ok := bootmark.Parse(out.String())
	if !ok || m.Name != bootmark.TSC || m.Uptime != 1500*time.Microsecond {
		t.Fatalf("tsc mark: %q", out.String())
	}
	if ticks, err := strconv.ParseUint(m.Arg, 10, 64); err != nil || ticks < before {
		t.Errorf("tsc %q is not a counter read after %d", m.Arg, before)
	}
}

// The answered mark comes only once the service answers, and not for a
// port that accepts but answers 5xx.
func TestMarkFirstAnswer(t *testing.T) {
	var calls atomic.Int32
	answered := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNotFound) // the second request counts as answered
		close(answered)
	}))
	// Listen late: the probe must keep trying while the port is closed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var out syncBuffer
	marker := Marker{Line: func(s string) { out.Write([]byte(s + "\n")) }, Uptime: func() time.Duration { return 7 * time.Millisecond }}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() { marker.FirstAnswer(ctx, port, time.Millisecond); close(done) }()
	time.Sleep(20 * time.Millisecond)
	if out.String() != "" {
		t.Fatalf("marked before anything listened: %q", out.String())
	}
	if srv.Listener, err = net.Listen("tcp", l.Addr().String()); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Close()
	<-done
	select {
	case <-answered:
	default:
		t.Fatal("the probe stopped before a request was answered below 500")
	}
	m, ok := bootmark.Parse(out.String())
	if !ok || m.Name != bootmark.Answered || m.Arg != strconv.Itoa(port) {
		t.Fatalf("answered mark: %q", out.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The probe reads the answer's status line: a line that is not one is no
// answer, as is none at all.
func TestStatusOf(t *testing.T) {
	for answer, want := range map[string]int{
		"HTTP/1.1 404 Not Found\r\n\r\n": 404,
		"HTTP/1.0 200 OK\r\n":            200,
		"HTTP/1.1 503\r\n":               503,
		"SSH-2.0-OpenSSH_9.2\r\n":        0,
		"HTTP/1.1 4x4\r\n":               0,
		"":                               0,
	} {
		client, server := net.Pipe()
		go func() {
			io.ReadAll(io.LimitReader(server, int64(len("GET / HTTP/1.1\r\n"))))
			server.Write([]byte(answer))
			server.Close()
		}()
		if got := statusOf(client, []byte("GET / HTTP/1.1\r\n")); got != want {
			t.Errorf("answer %q: status %d, want %d", answer, got, want)
		}
		client.Close()
	}
}
