// Package httpsrv makes the HTTP servers of nvboot's example services with
// the timeouts every server on an appliance needs: without them a client
// that opens a connection and sends nothing, or half a request, holds a
// descriptor and a goroutine for as long as it likes, and a few hundred
// such clients stop the service. kv paces request bodies itself (a
// per-request deadline that a reservation frees); the update endpoint has
// its own limits (device/update).
package httpsrv

import (
	"net/http"
	"time"
)

// Timeouts bound how long a client may take.
type Timeouts struct {
	Header time.Duration // to send the request line and headers
	Read   time.Duration // to send the whole request, body included; 0: no bound
	Idle   time.Duration // between requests on a kept-alive connection
}

// Default suits a service answering small requests: 10 s for the headers,
// a minute for the whole request, two minutes idle. Answers have no
// deadline: a large file to a slow client is not a fault.
var Default = Timeouts{Header: 10 * time.Second, Read: time.Minute, Idle: 2 * time.Minute}

// New is an http.Server for h with the timeouts t, and headers capped at
// 64 KiB.
func New(h http.Handler, t Timeouts) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.Header, ReadTimeout: t.Read, IdleTimeout: t.Idle, MaxHeaderBytes: 64 << 10}
}
