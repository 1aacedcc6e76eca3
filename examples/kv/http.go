package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/nvboot/nvboot/pheap"
)

// handler serves kv's HTTP API on st; inflight bounds the bytes of request
// bodies held in memory at once (see budget).
func handler(st store, inflight int64) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Kv-Version", version)
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st.Stats())
	})
	kv := &kvHandler{st: st, budget: &budget{limit: inflight}}
	// Routing goes by the path as sent. http.ServeMux cleans a path and
	// redirects to the clean one: a PUT to /kv/a//b got a 307 to /kv/a/b
	// (its value stored under another key if the client followed, else
	// not at all), and /kv a 307 to /kv/. Here nothing is redirected, and
	// the key grammar (key.go) refuses what a cleaning would change.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.EscapedPath(); {
		case p == "/kv":
			kv.list(w, r)
		case strings.HasPrefix(p, "/kv/"):
			kv.key(w, r, strings.TrimPrefix(p, "/kv/"))
		case p == "/healthz", p == "/stats":
			mux.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

type kvHandler struct {
	st     store
	budget *budget
}

// list answers GET /kv?prefix=P: the keys starting with P, one a line.
// The query is checked whole: a malformed one, another parameter or a
// second prefix is a 400, never the whole listing.
func (h *kvHandler) list(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, fmt.Sprintf("%s /kv: /kv is the listing (GET, HEAD); a key is written at /kv/KEY", r.Method), http.StatusMethodNotAllowed)
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		http.Error(w, fmt.Sprintf("query %q: %v (want prefix=P, percent-encoded)", r.URL.RawQuery, err), http.StatusBadRequest)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if name != "prefix" {
			http.Error(w, fmt.Sprintf("query parameter %q: GET /kv takes prefix only", name), http.StatusBadRequest)
			return
		}
		if n := len(q[name]); n > 1 {
			http.Error(w, fmt.Sprintf("prefix given %d times: want it once", n), http.StatusBadRequest)
			return
		}
	}
	prefix := q.Get("prefix")
	if err := checkText(prefix); err != nil {
		http.Error(w, fmt.Sprintf("prefix %q: %v", prefix, err), http.StatusBadRequest)
		return
	}
	keys, damaged, err := h.st.Keys(prefix)
	if err != nil {
		http.Error(w, fmt.Sprintf("listing prefix %q: %v", prefix, err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if damaged > 0 {
		// Not a 200: the listing is not whole. The keys that read follow
		// the line that says so: nothing readable is withheld.
		w.Header().Set(headerDamaged, strconv.Itoa(damaged))
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusInternalServerError)
		if r.Method != http.MethodHead {
			fmt.Fprintf(w, "listing prefix %q: %d stored key(s) left out: damaged (they fail their checksum), so neither named nor compared with the prefix; the keys that read follow, one a line\n", prefix, damaged)
		}
	}
	if r.Method == http.MethodHead {
		return
	}
	for _, k := range keys {
		fmt.Fprintln(w, k)
	}
}

// headerDamaged counts the damaged keys a listing left out.
const headerDamaged = "X-Kv-Damaged"

// key answers the requests for one key; rawKey is the escaped path after
// "/kv/".
func (h *kvHandler) key(w http.ResponseWriter, r *http.Request, rawKey string) {
	key, err := parseKey(rawKey)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		http.Error(w, fmt.Sprintf("key %q with a query (?%s): a request for a key takes none; a ? in a key is written %%3F", key, r.URL.RawQuery), http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.get(w, r, key)
	case http.MethodPut:
		h.put(w, r, key)
	case http.MethodDelete:
		switch err := h.st.Delete(key); {
		case errors.Is(err, errNotFound):
			http.Error(w, fmt.Sprintf("no key %q", key), http.StatusNotFound)
		case err != nil:
			http.Error(w, fmt.Sprintf("deleting %q: %v", key, err), http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, DELETE")
		http.Error(w, fmt.Sprintf("method %s: a key takes GET, HEAD, PUT and DELETE", r.Method), http.StatusMethodNotAllowed)
	}
}

func (h *kvHandler) get(w http.ResponseWriter, r *http.Request, key string) {
	v, err := h.st.Get(key)
	switch {
	case errors.Is(err, errNotFound):
		http.Error(w, fmt.Sprintf("no key %q", key), http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, fmt.Sprintf("reading %q: %v", key, err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(v)))
	if r.Method != http.MethodHead {
		w.Write(v)
	}
}

// put stores the body under key and answers 204 once it is durable. The
// body's bytes are reserved in the budget before it is read: when they do
// not fit, the answer is 503 with Retry-After, the body unread.
func (h *kvHandler) put(w http.ResponseWriter, r *http.Request, key string) {
	n := r.ContentLength // -1: not known (chunked)
	if n > maxValue {
		tooLarge(w, n)
		return
	}
	reserve := n
	if n < 0 {
		reserve = maxValue // what the body may grow to
	}
	if !h.budget.take(reserve) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("busy: the values being received take kv's limit of %s in memory (-inflight); retry", sizeText(h.budget.limit)), http.StatusServiceUnavailable)
		return
	}
	defer h.budget.give(reserve)
	val, err := readValue(r.Body, n)
	if errors.Is(err, errTooLarge) {
		tooLarge(w, -1)
		return
	}
	if isTimeout(err) {
		// Let go (server.go): the reservation is given back.
		http.Error(w, fmt.Sprintf("the value of %q did not arrive in time (-body-timeout): not stored; send it again", key), http.StatusRequestTimeout)
		return
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("reading the value of %q: %v", key, err), http.StatusBadRequest)
		return
	}
	if err := h.st.Put(key, val); err != nil {
		if isFull(err) {
			http.Error(w, fmt.Sprintf("not stored: the store is full (delete keys to make room): %v", err), http.StatusInsufficientStorage)
			return
		}
		http.Error(w, "not stored: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

var errTooLarge = errors.New("value too large")

func tooLarge(w http.ResponseWriter, n int64) {
	what := "a value of more bytes"
	if n >= 0 {
		what = fmt.Sprintf("a value of %d bytes", n)
	}
	http.Error(w, fmt.Sprintf("%s: the limit is %s (%d bytes)", what, sizeText(maxValue), maxValue), http.StatusRequestEntityTooLarge)
}

// readValue reads a PUT's body: n bytes when its length is known (n >= 0),
// otherwise at most maxValue (errTooLarge when there is more). The buffer
// is allocated once, of the size the budget reserved for it.
func readValue(body io.Reader, n int64) ([]byte, error) {
	if n >= 0 {
		buf := make([]byte, n)
		if got, err := io.ReadFull(body, buf); err != nil {
			return nil, fmt.Errorf("body ended after %d of its %d bytes (Content-Length): %w", got, n, err)
		}
		return buf, nil
	}
	buf := make([]byte, maxValue)
	got, err := io.ReadFull(body, buf)
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return buf[:got], nil
	case err != nil:
		return nil, err
	}
	var more [1]byte
	if k, _ := io.ReadFull(body, more[:]); k > 0 {
		return nil, errTooLarge
	}
	return buf, nil
}

// budget bounds the bytes of request bodies kv holds in memory at once: a
// PUT reserves its Content-Length (the largest value when the length is
// not known) before it reads its body, and gives it back once the value is
// stored. 200 concurrent 1 MiB PUTs got kv killed by the OOM killer in a
// 128 MiB guest. A PUT that does not fit is refused at once rather than
// queued: a queue would hold its connection and buffers as well, and a
// client told to retry later loses nothing (it got no 204).
type budget struct {
	mu          sync.Mutex
	used, limit int64
}

func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

// isFull says whether a Put failed for lack of room: the heap's arena or
// undo log, or the disk under the log. That is 507 Insufficient Storage,
// not a server fault: deleting keys makes room.
func isFull(err error) bool {
	return errors.Is(err, pheap.ErrNoSpace) || errors.Is(err, pheap.ErrLogFull) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// sizeText writes a byte count as people read it: "1 MiB", "64 KiB",
// "1000 bytes".
func sizeText(n int64) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
