package httpsrv

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A client that sends half a request, or stays idle after one, is
// disconnected once its timeout passes; a whole request is answered.
func TestStalledClientsAreDisconnected(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusRequestTimeout)
			return
		}
		io.WriteString(w, "ok")
	}),
		Timeouts{Header: 200 * time.Millisecond, Read: 400 * time.Millisecond, Idle: 200 * time.Millisecond})
	go srv.Serve(ln)
	defer srv.Close()
	for _, tc := range []struct{ name, send string }{
		{"nothing", ""},
		{"half the headers", "GET / HTTP/1.1\r\nHost: x\r\n"},
		{"headers, half the body", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345"},
		{"a whole request, then idle", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
	} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(tc.send))
		// The server closes first; the client's own deadline only ends a
		// test that would otherwise hang.
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Errorf("%s: the server did not close the connection: %v", tc.name, err)
		}
		if answered := strings.Contains(string(got), "200 OK"); answered != strings.HasSuffix(tc.send, "\r\n\r\n") {
			t.Errorf("%s: answer %q", tc.name, got)
		}
	}
}
