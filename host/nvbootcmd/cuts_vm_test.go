package nvbootcmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvboot/nvboot/internal/cli"
)

// Helpers of the random power-cut campaigns (TestDeployPowerCuts,
// TestUpdatePowerCuts): a writer that keeps kv busy from the host and
// remembers what kv acknowledged, a command run whose progress lines are
// timed as they come, and the seeded draw of the cut instants.

// cutCount is the number of cuts: $env when set above 0, else ci.
func cutCount(env string, ci int) int {
	if n, err := strconv.Atoi(os.Getenv(env)); err == nil && n > 0 {
		return n
	}
	return ci
}

// cutRand returns the campaign's generator and its seed, seeded from $env
// when set (a replay), else from the clock; the seed is logged either way.
func cutRand(t *testing.T, env string) (*rand.Rand, int64) {
	t.Helper()
	seed := time.Now().UnixNano()
	if s, err := strconv.ParseInt(os.Getenv(env), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (%s)", seed, env)
	return rand.New(rand.NewPCG(uint64(seed), 0)), seed
}

// cutSpans returns the spans the cut instants are drawn over: the
// measured ones, or those in $spanEnv (durations separated by commas, as
// logged) when set. It logs the line that replays the campaign's instants:
// the seed alone would draw them over another run's measured spans.
func cutSpans(t *testing.T, seedEnv string, seed int64, spanEnv string, measured ...time.Duration) []time.Duration {
	t.Helper()
	if v := os.Getenv(spanEnv); v != "" {
		var spans []time.Duration
		for _, f := range strings.Split(v, ",") {
			d, err := time.ParseDuration(f)
			if err != nil || d <= 0 {
				t.Fatalf("%s=%q: want %d durations above 0, separated by commas", spanEnv, v, len(measured))
			}
			spans = append(spans, d)
		}
		if len(spans) != len(measured) {
			t.Fatalf("%s=%q: want %d durations", spanEnv, v, len(measured))
		}
		measured = spans
	}
	var f []string
	for _, d := range measured {
		f = append(f, d.String())
	}
	t.Logf("cut instants drawn over %s (replay: %s=%d %s=%s)", strings.Join(f, " and "), seedEnv, seed, spanEnv, strings.Join(f, ","))
	return measured
}

// answer is one answer of kv's GET /healthz seen by the writer.
type answer struct {
	at      time.Time
	version string
}

// kvWriter PUTs a new key to kv about every 10 ms, each on a fresh
// connection, and keeps the keys kv acknowledged (2xx); beside it a prober
// asks /healthz every 10 ms (each ask given up after 500 ms: a guest not
// yet up leaves QEMU's forwarded connection hanging) and keeps the time
// and version of each answer.
type kvWriter struct {
	url, prefix string
	stop, done  chan struct{}

	mu      sync.Mutex
	acked   map[string]string
	answers []answer
}

func startWriter(url, prefix string) *kvWriter {
	w := &kvWriter{url: url, prefix: prefix, acked: map[string]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.write() }()
	go func() { defer wg.Done(); w.probe() }()
	go func() { wg.Wait(); close(w.done) }()
	return w
}

func (w *kvWriter) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

func (w *kvWriter) write() {
	cl := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for n := 1; !w.stopped(); n++ {
		key := fmt.Sprintf("/kv/%s-%d", w.prefix, n)
		val := fmt.Sprintf("%s write %d", w.prefix, n)
		req, _ := http.NewRequest(http.MethodPut, w.url+key, strings.NewReader(val))
		if resp, err := cl.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				w.mu.Lock()
				w.acked[key] = val
				w.mu.Unlock()
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *kvWriter) probe() {
	cl := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	for !w.stopped() {
		if resp, err := cl.Get(w.url + "/healthz"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				w.mu.Lock()
				w.answers = append(w.answers, answer{time.Now(), resp.Header.Get("X-Kv-Version")})
				w.mu.Unlock()
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop ends the writer; a PUT in flight at a power cut fails, and is not
// acknowledged.
func (w *kvWriter) Stop() {
	close(w.stop)
	<-w.done
}

// check fails t unless every acknowledged key reads back from kv at url
// with its value; it returns how many were checked.
func (w *kvWriter) check(t *testing.T, url, what string) int {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, v := range w.acked {
		if code, got, _ := kvGet(t, url, k); code != http.StatusOK || got != v {
			t.Errorf("%s: %s = %d %q, acknowledged as %q: an acknowledged write is lost", what, k, code, got, v)
		}
	}
	return len(w.acked)
}

// longestGap is the longest time between two consecutive health answers
// from the last one before from to the first one after to: how long kv
// did not answer (to the prober's step: 10 ms, 500 ms while nothing
// answers the connection).
func (w *kvWriter) longestGap(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gap time.Duration
	var prev time.Time
	for _, a := range w.answers {
		if !prev.IsZero() && !a.at.Before(from) && a.at.Sub(prev) > gap {
			gap = a.at.Sub(prev)
		}
		prev = a.at
		if a.at.After(to) {
			break
		}
	}
	return gap
}

// firstAnswer is the first health answer after from naming version.
func (w *kvWriter) firstAnswer(from time.Time, version string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.answers {
		if a.at.After(from) && a.version == version {
			return a.at, true
		}
	}
	return time.Time{}, false
}

// timedLines is a command's stderr that notes when each line came.
type timedLines struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines []answer // the line's text in version
}

func (l *timedLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for _, s := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.lines = append(l.lines, answer{now, s})
	}
	return l.buf.Write(p)
}

// when is the time of the first line containing s.
func (l *timedLines) when(s string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.lines {
		if strings.Contains(a.version, s) {
			return a.at, true
		}
	}
	return time.Time{}, false
}

func (l *timedLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// cmdRun is one nvboot command running in the background.
type cmdRun struct {
	start  time.Time
	stderr *timedLines
	stdout bytes.Buffer
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	end    time.Time
}

// startCmd runs nvboot args in the background, its stderr timed.
func startCmd(args ...string) *cmdRun {
	ctx, cancel := context.WithCancel(context.Background())
	r := &cmdRun{start: time.Now(), stderr: &timedLines{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = Execute(ctx, &cli.Context{Stdin: strings.NewReader(""), Stdout: &r.stdout, Stderr: r.stderr, Args: args})
		r.end = time.Now()
	}()
	return r
}

// finished tells whether the command has returned.
func (r *cmdRun) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// wait ends the command (cancelling it unless it returned by itself within
// grace) and waits for it.
func (r *cmdRun) wait(grace time.Duration) {
	select {
	case <-r.done:
	case <-time.After(grace):
		r.cancel()
		<-r.done
	}
	r.cancel()
}

// last is the last line that came before at: where the command was.
func (l *timedLines) last(at time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := "(nothing yet)"
	for _, a := range l.lines {
		if a.at.After(at) {
			break
		}
		s = a.version
	}
	return s
}
