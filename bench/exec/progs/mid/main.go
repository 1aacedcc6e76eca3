// Command mid stands for a small network service: it links net/http,
// encoding/json, crypto/tls, net/url, log/slog and the like (over 4 MiB
// of text and rodata), sets up what such a service sets up before it listens —
// flags, a logger, a mux, a TLS config, a page, a route pattern, a JSON
// encoding of its settings — prints one line and exits without listening.
// bench/exec times its start-up.
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"encoding/xml"
	"expvar"
	"flag"
	"fmt"
	"html"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"time"
)

type settings struct {
	Addr     string        `json:"addr"`
	Routes   []string      `json:"routes"`
	Timeout  time.Duration `json:"timeout"`
	TLSMin   uint16        `json:"tls_min"`
	Suites   int           `json:"cipher_suites"`
	Handlers int           `json:"handlers"`
	Page     string        `json:"page"`
	Feed     string        `json:"feed"`
	Gzip     int           `json:"gzip"`
}

func page(s *settings) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<h1>%s</h1><ul>", html.EscapeString(s.Addr))
	for _, r := range s.Routes {
		u := url.URL{Scheme: "https", Host: "localhost", Path: r}
		fmt.Fprintf(&b, "<li><a href=%q>%s</a></li>", u.String(), html.EscapeString(r))
	}
	return b.String() + "</ul>"
}

func main() {
	addr := flag.String("addr", ":8080", "listen address")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	idRoute := regexp.MustCompile(`^/v1/items/([0-9a-f]{8})$`)
	mux := http.NewServeMux()
	routes := []string{"/", "/healthz", "/v1/items", "/v1/items/{id}"}
	for _, r := range routes {
		mux.HandleFunc(r, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	srv := &http.Server{Addr: *addr, Handler: mux, TLSConfig: tc, ReadTimeout: 5 * time.Second}
	s := settings{Addr: srv.Addr, Routes: routes, Timeout: srv.ReadTimeout, TLSMin: tc.MinVersion,
		Suites: len(tls.CipherSuites()), Handlers: len(routes)}
	var gz bytes.Buffer
	s.Page = fmt.Sprintf("%x", sha256.Sum256([]byte(page(&s))))
	feed, _ := xml.Marshal(struct {
		XMLName xml.Name `xml:"feed"`
		Routes  []string `xml:"route"`
	}{Routes: routes})
	s.Feed = string(feed[:16])
	zw := gzip.NewWriter(&gz)
	zw.Write(feed)
	zw.Close()
	s.Gzip = gz.Len()
	if !idRoute.MatchString("/v1/items/0badcafe") {
		log.Error("route pattern broken")
		os.Exit(1)
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: srv.ReadTimeout}
	expvar.NewString("client_timeout").Set(client.Timeout.String())
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	mw.WriteField("routes", fmt.Sprint(len(routes)))
	mw.Close()
	if _, err := multipart.NewReader(&form, mw.Boundary()).ReadForm(1 << 10); err != nil {
		log.Error("multipart", "err", err)
		os.Exit(1)
	}
	b, err := json.Marshal(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mid:", err)
		os.Exit(1)
	}
	fmt.Printf("mid: %x\n", sha256.Sum256(b))
}
