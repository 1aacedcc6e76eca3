package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// safety bounds each wait of these tests for kv to act: it is how long a
// broken kv gets before the test fails, not a time kv is held to.
const safety = 20 * time.Second

// short are the timeouts of the tests' servers: short, so that the tests
// do not wait long for them.
var short = timeouts{header: 300 * time.Millisecond, body: 300 * time.Millisecond, idle: 300 * time.Millisecond}

// serveKV serves st as run does, with timeouts t, on a loopback port, and
// returns its address.
func serveKV(t *testing.T, st store, inflight int64, to timeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(st, inflight, to)
	go srv.Serve(kvListener(ln))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// dialSend opens a connection to addr and sends req as it is.
func dialSend(t *testing.T, addr, req string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// answer reads the answer to a request sent on c; the error says when
// there was none, or not within safety.
func answer(c net.Conn) (*http.Response, string, error) {
	c.SetReadDeadline(time.Now().Add(safety))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), nil
}

// Issue 26, item 4, as reported: seventeen PUTs that announce a 1 MiB
// value and then send nothing took -inflight (16 MiB) for good, and every
// later PUT was a 503. Each stalled PUT is now answered once its body is
// overdue (408, or the 503 of one that found the limit taken) and gives
// its reservation back: a PUT of the largest value is then stored.
func TestStalledPutsGiveTheirReservationBack(t *testing.T) {
	st := newHeapStore(t, 4<<20)
	addr := serveKV(t, st, defaultInflight, short)
	stalled := make([]net.Conn, defaultInflight/maxValue+1)
	for i := range stalled {
		stalled[i] = dialSend(t, addr, fmt.Sprintf("PUT /kv/stall/%d HTTP/1.1\r\nHost: kv\r\nContent-Length: %d\r\n\r\n", i, maxValue))
	}
	timedOut := 0
	for i, c := range stalled {
		resp, body, err := answer(c)
		switch {
		case err != nil:
			t.Fatalf("stalled PUT %d: no answer: %v", i, err)
		case resp.StatusCode == http.StatusRequestTimeout && strings.Contains(body, "-body-timeout"):
			timedOut++
		case resp.StatusCode == http.StatusServiceUnavailable:
		default:
			t.Errorf("stalled PUT %d: %d %q, want 408 naming -body-timeout (or 503)", i, resp.StatusCode, body)
		}
	}
	if timedOut == 0 {
		t.Error("no stalled PUT was answered 408")
	}
	if code, body := do(t, "PUT", "http://"+addr+"/kv/after", strings.Repeat("v", maxValue)); code != 204 {
		t.Fatalf("PUT after the stalled ones were let go: %d %q", code, body)
	}
	if keys := keysOf(t, st, ""); len(keys) != 1 || keys[0] != "after" {
		t.Errorf("keys %q, want only after", keys)
	}
}

// A PUT whose client goes away before its body arrives gives its
// reservation back as well: the limit taken by such PUTs frees up.
func TestDisconnectedPutsGiveTheirReservationBack(t *testing.T) {
	st := newHeapStore(t, 4<<20)
	addr := serveKV(t, st, defaultInflight, timeouts{header: safety, body: safety, idle: safety})
	for i := range defaultInflight / maxValue {
		c := dialSend(t, addr, fmt.Sprintf("PUT /kv/gone/%d HTTP/1.1\r\nHost: kv\r\nContent-Length: %d\r\n\r\nsome", i, maxValue))
		c.Close()
	}
	// kv notices each close when it reads, in its own time: a 503 until
	// then says it has not yet.
	deadline := time.Now().Add(safety)
	for {
		code, body := do(t, "PUT", "http://"+addr+"/kv/after", strings.Repeat("v", maxValue))
		if code == 204 {
			break
		}
		if code != 503 || time.Now().After(deadline) {
			t.Fatalf("PUT after the others disconnected: %d %q", code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A client that does not finish its request's headers, and a kept-alive
// connection left idle, are closed: neither holds a connection for good.
func TestHeaderAndIdleTimeouts(t *testing.T) {
	st := newHeapStore(t, 1<<20)
	addr := serveKV(t, st, defaultInflight, short)
	c := dialSend(t, addr, "GET /healthz HTTP/1.1\r\nHost: kv\r\n")
	c.SetReadDeadline(time.Now().Add(safety))
	if n, err := c.Read(make([]byte, 512)); err != io.EOF {
		t.Errorf("headers never finished: read %d bytes, %v; want kv to close the connection", n, err)
	}

	c = dialSend(t, addr, "GET /healthz HTTP/1.1\r\nHost: kv\r\n\r\n")
	if resp, _, err := answer(c); err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	c.SetReadDeadline(time.Now().Add(safety))
	if n, err := c.Read(make([]byte, 512)); err != io.EOF {
		t.Errorf("idle kept-alive connection: read %d bytes, %v; want kv to close it", n, err)
	}
}

// A % that starts no escape of two hex digits is refused with kv's rule
// (a % in a key is written %25), naming the key, not with Go's bare
// "400 Bad Request".
func TestBadEscapeNamesTheRule(t *testing.T) {
	st := newHeapStore(t, 1<<20)
	addr := serveKV(t, st, defaultInflight, short)
	for _, target := range []string{"/kv/%", "/kv/a%zz", "/kv/a/%4", "/kv/%g1/b"} {
		c := dialSend(t, addr, "PUT "+target+" HTTP/1.1\r\nHost: kv\r\nContent-Length: 1\r\n\r\nv")
		resp, body, err := answer(c)
		key := strings.TrimPrefix(target, "/kv/")
		if err != nil || resp.StatusCode != 400 || !strings.Contains(body, fmt.Sprintf("key %q", key)) || !strings.Contains(body, "%25") {
			t.Errorf("PUT %s: %v %q (%v), want 400 naming the key and the rule (%%25)", target, resp, body, err)
		}
	}
	// A keep-alive connection gets the same after a request that went well.
	c := dialSend(t, addr, "GET /healthz HTTP/1.1\r\nHost: kv\r\n\r\n")
	if resp, _, err := answer(c); err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	io.WriteString(c, "GET /kv/100% HTTP/1.1\r\nHost: kv\r\n\r\n")
	if resp, body, err := answer(c); err != nil || resp.StatusCode != 400 || !strings.Contains(body, `key "100%"`) {
		t.Errorf("second request GET /kv/100%%: %v %q %v", resp, body, err)
	}
	// Another malformed request is left to Go's answer.
	c = dialSend(t, addr, "GET /kv/a HTTP/9.9\r\nHost: kv\r\n\r\n")
	if resp, body, err := answer(c); err == nil && resp.StatusCode < 400 {
		t.Errorf("a malformed request line: %v %q", resp, body)
	}
	if keys := keysOf(t, st, ""); len(keys) != 0 {
		t.Errorf("refused requests stored %q", keys)
	}
}
