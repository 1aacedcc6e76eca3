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

// A deploy whose connection ends before the answer is a NoAnswerError
// that says how much of the body went out: all of it when the appliance
// lost its power during the trial (the outcome is unknown), part of it
// when the connection broke during the upload (nothing was switched).
func TestDeployWithoutAnswer(t *testing.T) {
	var readAll bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if readAll {
			io.Copy(io.Discard, r.Body)
		} else {
			io.CopyN(io.Discard, r.Body, 64<<10)
		}
		// The appliance goes away: no answer, the connection closed.
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		c.Close()
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, Password: "pw"}
	p := Program{Service: "kv", Header: make([]byte, 4096), Text: make([]byte, 32<<20)}
	total := int64(len(p.Header) + len(p.Text))
	for _, whole := range []bool{true, false} {
		readAll = whole
		_, err := c.Deploy(context.Background(), p)
		var na *NoAnswerError
		if !errors.As(err, &na) {
			t.Fatalf("body read whole %v: %v, want a NoAnswerError", whole, err)
		}
		if na.BodySent() != whole || na.Total != total || whole && na.Sent != total || !whole && na.Sent >= total {
			t.Errorf("body read whole %v: %+v (BodySent %v), want Total %d", whole, na, na.BodySent(), total)
		}
	}
}
