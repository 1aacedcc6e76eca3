package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, path, rng string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func TestServe(t *testing.T) {
	dir := t.TempDir()
	page := bytes.Repeat([]byte("<p>pmem</p>\n"), 50000) // 600 KB: several chunks? one; and many pages
	os.WriteFile(filepath.Join(dir, "index.html"), page, 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "a.txt"), []byte("a"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "escape"))
	s, err := newServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	for _, c := range []struct {
		path, rng string
		code      int
		body      []byte
	}{
		{"/", "", 200, page},
		{"/index.html", "", 200, page},
		{"/index.html", "bytes=5-9", 206, page[5:10]},
		{"/index.html", "bytes=-3", 206, page[len(page)-3:]},
		{"/sub/a.txt", "", 200, []byte("a")},
		{"/sub", "", 404, nil},
		{"/none", "", 404, nil},
		{"/escape", "", 404, nil}, // os.Root refuses to leave -root
		{"/../etc/passwd", "", 400, nil},
	} {
		code, body := get(t, s, c.path, c.rng)
		if code != c.code || (c.body != nil && !bytes.Equal(body, c.body)) {
			t.Errorf("GET %s %s = %d, %d bytes; want %d, %d bytes", c.path, c.rng, code, len(body), c.code, len(c.body))
		}
	}

	// A replaced file is served new; the old mapping is closed.
	old := s.files["sub/a.txt"]
	os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("bb"), 0o644)
	os.Rename(filepath.Join(dir, "sub", "b.txt"), filepath.Join(dir, "sub", "a.txt"))
	if code, body := get(t, s, "/sub/a.txt", ""); code != 200 || string(body) != "bb" {
		t.Fatalf("after replacing: %d %q", code, body)
	}
	if err := old.f.Close(); err == nil {
		t.Fatal("the replaced file was left open")
	}

	// Truncated while open: an error for the request, not a SIGBUS.
	if err := os.Truncate(filepath.Join(dir, "index.html"), 0); err != nil {
		t.Fatal(err)
	}
	e, err := s.get("index.html") // the stat sees the new size: reopened
	if err != nil {
		t.Fatal(err)
	}
	s.put("index.html", e)
	if e.size != 0 {
		t.Fatalf("size %d after truncation", e.size)
	}
}

func TestHelpAndUsage(t *testing.T) {
	var out, errb strings.Builder
	if err := run(context.Background(), []string{"-h"}, &out, &errb); err != nil || !strings.Contains(out.String(), "Examples:") {
		t.Fatalf("-h: %v, %q", err, out.String())
	}
	if err := run(context.Background(), []string{"extra"}, io.Discard, io.Discard); err == nil {
		t.Fatal("an extra argument was accepted")
	}
	if err := run(context.Background(), []string{"-root", "/nonexistent-dir"}, io.Discard, io.Discard); err == nil {
		t.Fatal("a missing -root was accepted")
	}
}
