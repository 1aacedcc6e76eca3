package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/pheap"
)

// rawResp is an answer, read whole.
type rawResp struct {
	code   int
	header http.Header
	body   string
}

// doRaw sends target (path and query) as it is written, without the
// cleaning or escaping a URL would get, and never follows a redirect.
func doRaw(t *testing.T, base, method, target string, body io.Reader) rawResp {
	t.Helper()
	req, err := http.NewRequest(method, base+"/", body)
	if err != nil {
		t.Fatal(err)
	}
	path, query, hasQuery := strings.Cut(target, "?")
	req.URL.Opaque, req.URL.RawQuery, req.URL.ForceQuery = path, query, hasQuery
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawResp{resp.StatusCode, resp.Header, string(b)}
}

// newTestServer serves st as run does, with the default timeouts, and
// returns its URL.
func newTestServer(t *testing.T, st store, inflight int64) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = newServer(st, inflight, defaultTimeouts)
	srv.Listener = kvListener(srv.Listener)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func newHeapStore(t *testing.T, size int64) *heapStore {
	t.Helper()
	st, err := openHeapStore(filepath.Join(t.TempDir(), "kv.heap"), size, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// The key grammar (see key.go): what falls outside it is a 400 that says
// why, never a redirect, and stores nothing; what is inside it is stored
// under exactly that key and listed on one line.
func TestKeyGrammar(t *testing.T) {
	st := newHeapStore(t, 4<<20)
	u := newTestServer(t, st, defaultInflight)
	for _, c := range []struct {
		method, target string
		code           int
		want           string // in the body
	}{
		{"PUT", "/kv/a//b", 400, "empty segment"},
		{"PUT", "/kv//a", 400, "empty segment"},
		{"PUT", "/kv/a/", 400, "empty segment"},
		{"PUT", "/kv/", 400, "empty key"},
		{"PUT", "/kv/a/../b", 400, `".."`},
		{"PUT", "/kv/./a", 400, `"."`},
		{"PUT", "/kv/%2E%2E/a", 400, `".."`},
		{"PUT", "/kv/a%2Fb", 400, "%2F"},
		{"PUT", "/kv/a%2fb", 400, "%2F"},
		{"PUT", "/kv/a%0Db", 400, "control character"},
		{"PUT", "/kv/a%0Ab", 400, "control character"},
		{"PUT", "/kv/a%00b", 400, "control character"},
		{"PUT", "/kv/a%7Fb", 400, "control character"},
		{"PUT", "/kv/a%C2%85b", 400, "control character"},
		{"PUT", "/kv/%FF", 400, "UTF-8"},
		{"PUT", "/kv/a%C3", 400, "UTF-8"},
		{"PUT", "/kv/%", 400, `key "%": the % at byte 0 starts no escape`},
		{"PUT", "/kv/a%zz", 400, `key "a%zz": the % at byte 1`},
		{"PUT", "/kv/a/b%2", 400, "%25"},
		{"GET", "/kv/100%", 400, "%25"},
		{"PUT", "/kv/a?x=1", 400, "query"},
		{"PUT", "/kv/a?", 400, "query"},
		{"PUT", "/kv/" + strings.Repeat("k", maxKey+1), 400, strconv.Itoa(maxKey)},
		{"PUT", "/kv", 405, ""},
		{"DELETE", "/kv", 405, ""},
		{"POST", "/kv/a", 405, ""},
		{"PUT", "/./kv/a", 404, ""},
		{"PUT", "/kv/../kv/a", 400, `".."`},
		{"GET", "/kv/a//b", 400, "empty segment"},
		{"DELETE", "/kv/a/../b", 400, `".."`},
		{"GET", "/kv?prefix=%ZZ", 400, "prefix"},
		{"GET", "/kv?prefix=a&prefix=b", 400, "prefix"},
		{"GET", "/kv?prefx=a", 400, "prefx"},
		{"GET", "/kv?prefix=a%0A", 400, "control character"},
		{"GET", "/kv?prefix=%FF", 400, "UTF-8"},
	} {
		r := doRaw(t, u, c.method, c.target, strings.NewReader("v"))
		if r.code != c.code || !strings.Contains(r.body, c.want) || r.header.Get("Location") != "" {
			t.Errorf("%s %.60s: %d %q (Location %q), want %d with %q", c.method, c.target, r.code, r.body, r.header.Get("Location"), c.code, c.want)
		}
		if c.code == 405 && r.header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", c.method, c.target)
		}
	}
	if keys := keysOf(t, st, ""); len(keys) != 0 {
		t.Fatalf("refused requests stored %q", keys)
	}

	// Inside the grammar: stored under exactly the decoded key.
	for _, c := range []struct{ target, key string }{
		{"/kv/a/b", "a/b"},
		{"/kv/a%20b", "a b"},
		{"/kv/caf%C3%A9", "café"},
		{"/kv/caf\xc3\xa9/x", "café/x"},
		{"/kv/q%3Fh%23p%25", "q?h#p%"},
		{"/kv/a:b@c!$&'()*+,;=", "a:b@c!$&'()*+,;="},
		{"/kv/.a/..b/...", ".a/..b/..."},
		{"/kv/" + strings.Repeat("k", maxKey), strings.Repeat("k", maxKey)},
	} {
		if r := doRaw(t, u, "PUT", c.target, strings.NewReader(c.key)); r.code != 204 {
			t.Errorf("PUT %.60s: %d %q, want 204", c.target, r.code, r.body)
			continue
		}
		if v, err := st.Get(c.key); err != nil || string(v) != c.key {
			t.Errorf("PUT %.60s: key %.60q holds %q, %v", c.target, c.key, v, err)
		}
		if r := doRaw(t, u, "GET", c.target, nil); r.code != 200 || r.body != c.key {
			t.Errorf("GET %.60s: %d %.60q", c.target, r.code, r.body)
		}
	}
	r := doRaw(t, u, "GET", "/kv?prefix=caf%C3%A9", nil)
	if r.code != 200 || r.body != "café\ncafé/x\n" {
		t.Errorf("GET /kv?prefix=café: %d %q", r.code, r.body)
	}
	r = doRaw(t, u, "GET", "/kv", nil)
	if lines := strings.Split(strings.TrimSuffix(r.body, "\n"), "\n"); r.code != 200 || len(lines) != len(keysOf(t, st, "")) {
		t.Errorf("GET /kv: %d, %d lines for %d keys", r.code, len(lines), len(keysOf(t, st, "")))
	}
}

// HEAD is GET without the body, on every route.
func TestHead(t *testing.T) {
	st := newHeapStore(t, 1<<20)
	st.Put("a", []byte("value"))
	u := newTestServer(t, st, defaultInflight)
	for _, c := range []struct {
		target string
		code   int
		length string
	}{
		{"/kv/a", 200, "5"},
		{"/kv/missing", 404, ""},
		{"/kv", 200, ""},
		{"/kv?prefix=a", 200, ""},
		{"/stats", 200, ""},
		{"/healthz", 200, ""},
	} {
		r := doRaw(t, u, "HEAD", c.target, nil)
		if r.code != c.code || r.body != "" || c.length != "" && r.header.Get("Content-Length") != c.length {
			t.Errorf("HEAD %s: %d %q, Content-Length %q; want %d, no body, length %q", c.target, r.code, r.body, r.header.Get("Content-Length"), c.code, c.length)
		}
	}
}

// A value over the limit is a 413 that states the limit, with or without
// a Content-Length; a value at the limit is stored.
func TestValueLimit(t *testing.T) {
	st := newHeapStore(t, 8<<20)
	u := newTestServer(t, st, defaultInflight)
	big := strings.Repeat("v", maxValue)
	if r := doRaw(t, u, "PUT", "/kv/max", strings.NewReader(big)); r.code != 204 {
		t.Fatalf("a value of %d bytes: %d %q", maxValue, r.code, r.body)
	}
	for name, body := range map[string]io.Reader{
		"Content-Length": strings.NewReader(big + "v"),
		"chunked":        io.MultiReader(strings.NewReader(big), strings.NewReader("v")), // no length known
	} {
		r := doRaw(t, u, "PUT", "/kv/big", body)
		if r.code != 413 || !strings.Contains(r.body, strconv.Itoa(maxValue)) || !strings.Contains(r.body, "1 MiB") {
			t.Errorf("%s: %d %q, want 413 stating the limit (%d bytes, 1 MiB)", name, r.code, r.body, maxValue)
		}
	}
	if _, err := st.Get("big"); err == nil {
		t.Error("a value over the limit was stored")
	}
}

// A full heap is 507 Insufficient Storage, as a full disk under the log
// is; the error says the store is full. Deleting makes room again.
func TestFullIs507(t *testing.T) {
	st := newHeapStore(t, 1<<20)
	u := newTestServer(t, st, defaultInflight)
	val := strings.Repeat("v", 100<<10)
	full := -1
	for i := range 20 {
		r := doRaw(t, u, "PUT", fmt.Sprint("/kv/k", i), strings.NewReader(val))
		if r.code == 204 {
			continue
		}
		if r.code != 507 || !strings.Contains(r.body, "full") {
			t.Fatalf("put %d into a 1 MiB heap: %d %q, want 507 saying it is full", i, r.code, r.body)
		}
		full = i
		break
	}
	if full < 1 {
		t.Fatalf("first refused put: %d", full)
	}
	if r := doRaw(t, u, "DELETE", "/kv/k0", nil); r.code != 204 {
		t.Fatalf("delete: %d %q", r.code, r.body)
	}
	if r := doRaw(t, u, "PUT", "/kv/again", strings.NewReader(val)); r.code != 204 {
		t.Fatalf("put after a delete: %d %q", r.code, r.body)
	}

	// The log's disk full, and an error that is no lack of room.
	for _, c := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("appending to kv.log: %w", syscall.ENOSPC), 507},
		{fmt.Errorf("appending to kv.log: %w", syscall.EDQUOT), 507},
		{fmt.Errorf("x: %w", pheap.ErrNoSpace), 507},
		{fmt.Errorf("x: %w", pheap.ErrIO), 500},
	} {
		u := newTestServer(t, &failingStore{store: st, err: c.err}, defaultInflight)
		if r := doRaw(t, u, "PUT", "/kv/x", strings.NewReader("v")); r.code != c.code {
			t.Errorf("Put failing with %v: %d %q, want %d", c.err, r.code, r.body, c.code)
		}
	}
}

// failingStore fails every Put with err.
type failingStore struct {
	store
	err error
}

func (s *failingStore) Put(string, []byte) error { return s.err }

// gatedStore holds every Put until release is closed, and says which key
// reached Put on entered: kv still holds the body then.
type gatedStore struct {
	store
	entered chan string
	release chan struct{}
}

func (s *gatedStore) Put(key string, val []byte) error {
	s.entered <- key
	<-s.release
	return s.store.Put(key, val)
}

// The bytes of request bodies in memory are bounded: with the limit taken
// by PUTs in flight, the next is a 503 with Retry-After before kv reads its
// body (200 concurrent 1 MiB PUTs made the OOM killer kill kv in a 128 MiB
// guest). Once they are done, the same PUT is stored. A body without a
// length counts as the largest value.
func TestInflightLimit(t *testing.T) {
	gs := &gatedStore{store: newHeapStore(t, 16<<20), entered: make(chan string, 10), release: make(chan struct{})}
	u := newTestServer(t, gs, 3*maxValue)
	var release sync.Once
	open := func() { release.Do(func() { close(gs.release) }) }
	t.Cleanup(open) // before the server's Close, which waits for the held PUTs
	val := strings.Repeat("v", maxValue)
	done := make(chan rawResp, 10)
	put := func(key string, body io.Reader) {
		go func() { done <- doRaw(t, u, "PUT", "/kv/"+key, body) }()
	}
	for i := range 2 {
		put(fmt.Sprint("held", i), strings.NewReader(val))
		<-gs.entered
	}
	put("chunked", io.MultiReader(strings.NewReader("small"))) // no length: counts as maxValue
	<-gs.entered
	for _, body := range []io.Reader{strings.NewReader(val), strings.NewReader("x")} {
		put("over", body)
		select {
		case key := <-gs.entered:
			t.Fatalf("%s reached the store with %d bytes of bodies in flight", key, 3*maxValue)
		case r := <-done:
			if r.code != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "3 MiB") {
				t.Fatalf("PUT with the limit taken: %d %q (Retry-After %q), want 503 with Retry-After naming the limit", r.code, r.body, r.header.Get("Retry-After"))
			}
		}
	}
	open()
	for range 3 {
		if r := <-done; r.code != 204 {
			t.Errorf("held PUT: %d %q", r.code, r.body)
		}
	}
	if r := doRaw(t, u, "PUT", "/kv/over", strings.NewReader(val)); r.code != 204 {
		t.Fatalf("PUT after the others: %d %q", r.code, r.body)
	}
	if v, err := gs.Get("over"); err != nil || !bytes.Equal(v, []byte(val)) {
		t.Fatalf("over: %d bytes, %v", len(v), err)
	}
}

// -inflight below the largest value would refuse every large PUT: a usage
// error.
func TestInflightFlag(t *testing.T) {
	for _, c := range []struct {
		v  string
		ok bool
	}{{"16MiB", true}, {"1MiB", true}, {"1048575", false}, {"0", false}} {
		err := run(t.Context(), []string{"-listen", "256.0.0.1:80", "-inflight", c.v, "-state", filepath.Join(t.TempDir(), "kv.log")}, io.Discard)
		if usage := errors.Is(err, cli.ErrUsage) && strings.Contains(err.Error(), "-inflight"); usage == c.ok {
			t.Errorf("-inflight %s: %v", c.v, err)
		}
	}
}
