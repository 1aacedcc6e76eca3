package update

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/contract"
)

// Server is the update endpoint nvinit serves when its config has an
// Update password (contract.Update): `nvboot deploy` and `nvboot update`
// talk to it. Authenticated, it routes each request to its handler; a
// deploy's store steps and its trial run on Sup's goroutine.
type Server struct {
	Password string
	// Programs is the mounted text store's deployed programs; nil: no
	// store, no deploys (the A/B update still is served).
	Programs *Programs
	Sup      Supervisor
	// Images are the services' programs as built, by name (their config
	// Path): what a service without a link runs.
	Images map[string]string
	Logf   func(format string, args ...any)
	// Slots is a slotted boot (the A/B update's endpoints); nil: none.
	Slots *SlotState
	// SlotDevice gives a slot partition's device; nil: contract.SlotDevice.
	SlotDevice func(part string) string
	// Reboot reboots the appliance (POST PathReboot); nil: refused.
	Reboot func()
	// Limits bound connections, times and an upload's memory; zero
	// fields take the defaults.
	Limits Limits
	// InitText is how nvinit's own text came up at this boot, for
	// Features.InitText; "": from the text store.
	InitText string
	// PullToken authenticates nvpull on the local socket (ServeLocal:
	// user contract.PullUser), and only there; "": no local endpoint.
	PullToken string
	// PullStatus is the file nvpull writes its status to, served on
	// contract.PathPull; "": the appliance does not pull.
	PullStatus string

	// mu is held by one deploy, gc or slot write at a time, taken before
	// an upload's body is read: a second upload is refused unread.
	mu sync.Mutex
}

// Serve listens on port until ctx ends; with certFile and keyFile (PEM),
// HTTPS only. Limits bound the connections, their times and an upload's
// memory.
func (u *Server) Serve(ctx context.Context, port int, certFile, keyFile string) error {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("update endpoint on port %d: %w", port, err)
	}
	return u.serveOn(ctx, l, certFile, keyFile)
}

// ServeLocal serves nvpull on the unix socket path (mode 0600, made
// anew; its directory made) until ctx ends: plain HTTP, the one password
// PullToken. The same Server as Serve's, so the lock that allows one
// deploy, gc or slot write at a time holds across both.
func (u *Server) ServeLocal(ctx context.Context, path string) error {
	if u.PullToken == "" {
		return errors.New("local update endpoint: no token")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("local update endpoint: %w", err)
	}
	os.Remove(path) // a socket of an earlier run of nvinit's
	// Made 0600 from the start: no moment in which another user could
	// connect.
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return fmt.Errorf("local update endpoint on %s: %w", path, err)
	}
	return u.serveOn(context.WithValue(ctx, localKey{}, true), l, "", "")
}

// localKey marks the requests of the local socket in their context.
type localKey struct{}

// serveOn serves on l until ctx ends, and closes l. A request's context
// derives from ctx (ServeLocal marks its own).
func (u *Server) serveOn(ctx context.Context, l net.Listener, certFile, keyFile string) error {
	lim := u.Limits.withDefaults()
	// Counted below TLS, so a connection holds its slot from the accept,
	// handshake included; one over the limit gets a plain-HTTP 503 only
	// without TLS (a TLS client would read it as a broken handshake).
	reject := busyAnswer(lim.MaxConns)
	if certFile != "" {
		reject = nil
	}
	l = newLimitListener(l, lim.MaxConns, reject)
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			l.Close()
			return fmt.Errorf("update endpoint: its certificate: %w", err)
		}
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})
	}
	// No ReadTimeout or WriteTimeout: they would bound a whole request,
	// and a deploy's answer waits for its trial (up to 10 min). A body's
	// rate and an answer's write are bounded per request in ServeHTTP.
	srv := &http.Server{Handler: u, ReadHeaderTimeout: lim.HeaderTimeout, IdleTimeout: lim.IdleTimeout, MaxHeaderBytes: maxHeaderBytes,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeHTTP bounds the request's body and answer in time, authenticates,
// then routes.
func (u *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lim := u.Limits.withDefaults()
	rc := http.NewResponseController(w)
	// A kept-alive connection keeps the last answer's write deadline.
	rc.SetWriteDeadline(time.Time{})
	w = &deadlineWriter{ResponseWriter: w, rc: rc, timeout: lim.WriteTimeout}
	if r.ContentLength != 0 {
		// Set now, not at the first read: net/http drains a small body no
		// handler read (a 401, a 409) before the answer goes out, and that
		// must not hold the connection either.
		rc.SetReadDeadline(time.Now().Add(lim.Stall))
		// On a copy of the request: net/http looks at the body of the one
		// it holds to tell an unread body it need not drain (it closes the
		// connection instead), and must find its own there.
		r = r.WithContext(r.Context())
		r.Body = &progressBody{ReadCloser: r.Body, rc: rc, lim: lim}
	}
	if !u.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="nvboot"`)
		http.Error(w, "wrong or missing password (HTTP Basic, user "+contract.UpdateUser+", the config's Update.HTTPPassword)", http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case contract.PathHave, contract.PathDeploy, contract.PathGC:
		if u.Programs == nil {
			http.Error(w, "no text store is mounted on this appliance (nor, on an image without one, a state): nothing to deploy into (an A/B update can still replace the image)", http.StatusConflict)
			return
		}
	}
	switch r.URL.Path {
	case contract.PathFeatures:
		u.only(w, r, http.MethodGet, u.features)
	case contract.PathHave:
		u.only(w, r, http.MethodPost, u.have)
	case contract.PathDeploy:
		u.only(w, r, http.MethodPut, u.deploy)
	case contract.PathGC:
		u.only(w, r, http.MethodPost, u.gc)
	case contract.PathRoot:
		u.only(w, r, http.MethodPut, u.writeSlot("root"))
	case contract.PathBoot:
		u.only(w, r, http.MethodPut, u.writeSlot("boot"))
	case contract.PathTestBoot:
		u.only(w, r, http.MethodPost, u.testBoot)
	case contract.PathReboot:
		u.only(w, r, http.MethodPost, u.reboot)
	case contract.PathPull:
		u.only(w, r, http.MethodGet, u.pullStatus)
	default:
		http.Error(w, "no such endpoint: "+r.URL.Path, http.StatusNotFound)
	}
}

// authorized says whether r carries the password: on the local socket
// nvpull's token, user contract.PullUser; elsewhere the config's password,
// user contract.UpdateUser. Compared in constant time, user and password
// both, so the answer's timing says nothing about how much of a guess was
// right.
func (u *Server) authorized(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	wantUser, wantPass := contract.UpdateUser, u.Password
	if r.Context().Value(localKey{}) != nil {
		wantUser, wantPass = contract.PullUser, u.PullToken
	}
	return ok && wantPass != "" &&
		subtle.ConstantTimeCompare([]byte(user), []byte(wantUser))&subtle.ConstantTimeCompare([]byte(pass), []byte(wantPass)) == 1
}

// pullStatus answers what nvpull last wrote of its status.
func (u *Server) pullStatus(w http.ResponseWriter, r *http.Request) {
	if u.PullStatus == "" {
		http.Error(w, "this appliance pulls no updates (its config has no Update.Registry)", http.StatusNotFound)
		return
	}
	b, err := os.ReadFile(u.PullStatus)
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "nvpull has written no status yet ("+u.PullStatus+"): it has not polled, or the state filesystem is not mounted", http.StatusServiceUnavailable)
		return
	}
	var st *contract.PullStatus
	if err == nil {
		st, err = contract.ParsePullStatus(b)
	}
	if err != nil {
		http.Error(w, "nvpull's status: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set(contract.HeaderDeviceClock, time.Now().Format(time.RFC3339Nano))
	reply(w, st)
}

func (u *Server) only(w http.ResponseWriter, r *http.Request, method string, h func(http.ResponseWriter, *http.Request)) {
	if r.Method != method {
		w.Header().Set("Allow", method)
		http.Error(w, r.URL.Path+" wants "+method, http.StatusMethodNotAllowed)
		return
	}
	h(w, r)
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (u *Server) features(w http.ResponseWriter, r *http.Request) {
	f := contract.Features{Arch: runtime.GOARCH, InitText: u.InitText}
	switch {
	case u.Programs != nil && u.Programs.ELF:
		f.Features = []string{contract.FeatureDeployELF, "gc"}
	case u.Programs != nil:
		f.Features = []string{contract.FeatureDeploy, "gc"}
	}
	if u.PullStatus != "" {
		f.Features = append(f.Features, "pull")
	}
	u.slotFeatures(&f)
	reply(w, f)
}

func (u *Server) have(w http.ResponseWriter, r *http.Request) {
	var req contract.HaveRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, "reading the list of texts: "+err.Error(), http.StatusBadRequest)
		return
	}
	if u.Programs.ELF {
		http.Error(w, "this appliance has no text store (the elf layout): it holds no texts, and takes whole programs", http.StatusConflict)
		return
	}
	reply(w, contract.HaveResponse{Have: u.Programs.have(req.Texts)})
}

func (u *Server) gc(w http.ResponseWriter, r *http.Request) {
	if !u.mu.TryLock() {
		http.Error(w, "a deploy is running on this appliance; gc when it is done", http.StatusConflict)
		return
	}
	defer u.mu.Unlock()
	var res contract.GCResult
	var gerr error
	if err := u.Sup.Do(func() { res, gerr = u.Programs.gc() }); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if gerr != nil {
		http.Error(w, "gc: "+gerr.Error(), http.StatusConflict)
		return
	}
	reply(w, res)
}

func (u *Server) logf(format string, args ...any) {
	if u.Logf != nil {
		u.Logf(format, args...)
	}
}
