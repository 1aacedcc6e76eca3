package pull

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWaitClock: with ClockSet, Run's first poll waits for the file, saying
// why once, or polls anyway after clockWaitMax; ctx's end ends the wait.
func TestWaitClock(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "clock-set")
	var logs []string
	sleeps := 0
	p := &Puller{ClockSet: mark, Now: func() time.Time { return time.Unix(60, 0) },
		Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) },
		Sleep: func(ctx context.Context, d time.Duration) error {
			if sleeps++; sleeps == 3 {
				os.WriteFile(mark, []byte("pool.ntp.org\n"), 0o644)
			}
			return ctx.Err()
		}}
	if err := p.waitClock(context.Background()); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(logs, "\n")
	if sleeps != 3 || len(logs) != 2 || !strings.Contains(all, "reads 1970-01-01T00:01:00Z") || !strings.Contains(all, "the clock is set") {
		t.Errorf("%d sleeps, logs:\n%s", sleeps, all)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (&Puller{ClockSet: mark + ".none", Sleep: p.Sleep}).waitClock(ctx); err == nil {
		t.Error("a cancelled wait returned no error")
	}
	if err := (&Puller{}).waitClock(ctx); err != nil {
		t.Errorf("without ClockSet: %v", err)
	}
	// A clock never set: polled anyway after clockWaitMax, and said.
	logs, sleeps = nil, 0
	never := &Puller{ClockSet: mark + ".never", Now: p.Now, Logf: p.Logf,
		Sleep: func(context.Context, time.Duration) error { sleeps++; return nil }}
	if err := never.waitClock(context.Background()); err != nil || sleeps != int(clockWaitMax/time.Second) ||
		!strings.Contains(strings.Join(logs, "\n"), "polling anyway") {
		t.Errorf("never set: %v after %d sleeps, logs %q", err, sleeps, logs)
	}
}

// TestClockHint: a real TLS handshake from a client whose clock is outside
// the certificate's validity (httptest's is valid from 1970 to 2084, so
// the clock reads 2100 here) fails its certificate check, and the error
// names the clock; another error is left as it is.
func TestClockHint(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	wrong := func() time.Time { return time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC) }
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Time: wrong}}}
	_, err := c.Get(srv.URL)
	if err == nil {
		t.Fatal("a handshake at 2100 succeeded")
	}
	p := &Puller{Now: wrong}
	got := p.withClockHint(outage("polling r:t: %w", err))
	var out *outageError
	if !strings.Contains(got.Error(), "clock reads 2100-01-01T00:00:00Z") || !errors.As(got, &out) {
		t.Errorf("error %v: want it naming the clock, still an outage", got)
	}
	other := errors.New("connection refused")
	if p.withClockHint(other) != other {
		t.Error("another error was changed")
	}
}
