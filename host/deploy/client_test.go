package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

func TestParseURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://10.0.2.15":  "http://10.0.2.15",
		"https://box:8443/": "https://box:8443",
		"ftp://box":         "",
		"box:80":            "",
		"http://box/update": "",
		"http://box?x=1":    "",
		"http://":           "",
		"http://[::1]:8081": "http://[::1]:8081",
	} {
		got, err := ParseURL(in)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("ParseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// The request deploy sends: authenticated, the parts' sizes, the body's
// SHA-256, the deadline; and how answers other than 200 come back.
func TestDeployRequest(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, body = r, nil
		body, _ = io.ReadAll(r.Body)
		switch r.Header.Get(contract.HeaderService) {
		case "unauth":
			http.Error(w, "wrong or missing password", http.StatusUnauthorized)
		case "refused":
			http.Error(w, "truncated upload", http.StatusBadRequest)
		default:
			io.WriteString(w, `{"Service":"kv","Result":"kept"}`)
		}
	}))
	defer srv.Close()
	var last int64
	c := &Client{URL: srv.URL, Password: "pw", Progress: func(sent, total int64) { last = sent }}
	p := Program{Service: "kv", Header: []byte("header"), Text: []byte("text"), Deadline: 90e9}
	res, err := c.Deploy(context.Background(), p)
	if err != nil || res.Result != contract.DeployKept {
		t.Fatalf("Deploy = %+v, %v", res, err)
	}
	sum := sha256.Sum256([]byte("headertext"))
	user, pw, _ := got.BasicAuth()
	for _, c := range []struct{ what, got, want string }{
		{"auth", user + ":" + pw, contract.UpdateUser + ":pw"},
		{"header size", got.Header.Get(contract.HeaderHeaderSize), "6"},
		{"text size", got.Header.Get(contract.HeaderTextSize), "4"},
		{"body hash", got.Header.Get(contract.HeaderBodySHA256), hex.EncodeToString(sum[:])},
		{"deadline", got.Header.Get(contract.HeaderDeadline), "1m30s"},
		{"body", string(body), "headertext"},
		{"Content-Length", strconv.FormatInt(got.ContentLength, 10), "10"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
		}
	}
	if last != 10 {
		t.Errorf("progress ended at %d, want 10", last)
	}
	p.Service = "unauth"
	if _, err := c.Deploy(context.Background(), p); !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "Update.HTTPPassword") {
		t.Errorf("401: %v", err)
	}
	p.Service = "refused"
	var se *StatusError
	if _, err := c.Deploy(context.Background(), p); !errors.As(err, &se) || se.Code != 400 || !strings.Contains(err.Error(), "truncated upload") {
		t.Errorf("400: %v", err)
	}
}
