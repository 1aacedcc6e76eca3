package update

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/off2f"
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

	mu sync.Mutex // one deploy, gc or update at a time
}

// Serve listens on port until ctx ends; with certFile and keyFile (PEM),
// HTTPS only.
func (u *Server) Serve(ctx context.Context, port int, certFile, keyFile string) error {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("update endpoint on port %d: %w", port, err)
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			l.Close()
			return fmt.Errorf("update endpoint: its certificate: %w", err)
		}
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})
	}
	srv := &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeHTTP authenticates, then routes.
func (u *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, pass, ok := r.BasicAuth()
	// Compared in constant time, user and password both, so the answer's
	// timing says nothing about how much of a guess was right.
	if !ok || u.Password == "" ||
		subtle.ConstantTimeCompare([]byte(user), []byte(contract.UpdateUser))&subtle.ConstantTimeCompare([]byte(pass), []byte(u.Password)) != 1 {
		w.Header().Set("WWW-Authenticate", `Basic realm="nvboot"`)
		http.Error(w, "wrong or missing password (HTTP Basic, user "+contract.UpdateUser+", the config's Update.HTTPPassword)", http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case contract.PathHave, contract.PathDeploy, contract.PathGC:
		if u.Programs == nil {
			http.Error(w, "no text store is mounted on this appliance: nothing to deploy into (an A/B update can still replace the image)", http.StatusConflict)
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
	default:
		http.Error(w, "no such endpoint: "+r.URL.Path, http.StatusNotFound)
	}
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
	f := contract.Features{Arch: runtime.GOARCH}
	if u.Programs != nil {
		f.Features = []string{"deploy", "gc"}
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
	reply(w, contract.HaveResponse{Have: u.Programs.have(req.Texts)})
}

// upload is a deploy's body, read whole and checked.
type upload struct {
	service      string
	header, text []byte
	hdr          *off2f.Header
	deadline     time.Duration
}

// badRequest is an upload refused before anything was written.
type badRequest struct{ error }

// readUpload reads and checks a deploy's body: the sizes and hash the
// headers announce, then the program itself (an OFF2F header for this
// machine naming the store, its text matching it). Nothing is written.
func (u *Server) readUpload(r *http.Request) (*upload, error) {
	bad := func(format string, args ...any) error { return badRequest{fmt.Errorf(format, args...)} }
	up := &upload{service: r.Header.Get(contract.HeaderService)}
	if _, ok := u.Images[up.service]; !ok {
		return nil, bad("%s %q: no such service in this appliance's config", contract.HeaderService, up.service)
	}
	size := func(h string) (int64, error) {
		n, err := strconv.ParseInt(r.Header.Get(h), 10, 64)
		if err != nil || n < 0 || n > contract.MaxDeployBody {
			return 0, bad("%s %q: want a byte count up to %d", h, r.Header.Get(h), contract.MaxDeployBody)
		}
		return n, nil
	}
	hsize, err := size(contract.HeaderHeaderSize)
	if err != nil {
		return nil, err
	}
	tsize, err := size(contract.HeaderTextSize)
	if err != nil {
		return nil, err
	}
	if hsize == 0 || hsize+tsize > contract.MaxDeployBody {
		return nil, bad("upload of %d+%d bytes: the header file is empty, or the whole is above %d bytes", hsize, tsize, contract.MaxDeployBody)
	}
	want, err := hex.DecodeString(r.Header.Get(contract.HeaderBodySHA256))
	if err != nil || len(want) != sha256.Size {
		return nil, bad("%s %q: want 64 hex digits", contract.HeaderBodySHA256, r.Header.Get(contract.HeaderBodySHA256))
	}
	if up.deadline, err = contract.ParseReadyDeadline(r.Header.Get(contract.HeaderDeadline)); err != nil {
		return nil, badRequest{err}
	}
	// Held in memory as it arrives, never sized by what the headers
	// claim: a claim of 256 MiB must not make PID 1 allocate it.
	h := sha256.New()
	body, err := io.ReadAll(io.LimitReader(io.TeeReader(r.Body, h), hsize+tsize+1))
	switch {
	case err != nil || int64(len(body)) < hsize+tsize:
		return nil, bad("truncated upload: %d of %d bytes arrived (%v); nothing was written", len(body), hsize+tsize, err)
	case int64(len(body)) > hsize+tsize:
		return nil, bad("upload longer than the %d bytes announced; nothing was written", hsize+tsize)
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		return nil, bad("upload hash mismatch: the body hashes to %x, the sender said %x (damaged in transit?); nothing was written", got, want)
	}
	up.header = body[:hsize]
	if tsize > 0 {
		up.text = body[hsize:]
	}
	if err := u.checkProgram(up); err != nil {
		return nil, badRequest{err}
	}
	return up, nil
}

// checkProgram checks that the program can run here: an OFF2F header file
// for this machine whose text is in this store, and the text, if sent,
// the one the header names, whole.
func (u *Server) checkProgram(up *upload) error {
	f, err := elf.NewFile(bytes.NewReader(up.header))
	if err != nil {
		return fmt.Errorf("the header file is not an ELF file: %w", err)
	}
	if want := machineOf(runtime.GOARCH); f.Machine != want {
		return fmt.Errorf("the program is built for %v, this appliance is %s (%v): build it for %s", f.Machine, runtime.GOARCH, want, runtime.GOARCH)
	}
	hdr, err := off2f.ParseHeader(up.header)
	if err != nil {
		return fmt.Errorf("the header file is not an OFF2F header: %w", err)
	}
	if dir := u.Programs.dir(); filepath.Clean(hdr.Note.StoreDir) != filepath.Clean(dir) {
		return fmt.Errorf("the program's note names the text store %s, this appliance's is %s", hdr.Note.StoreDir, dir)
	}
	up.hdr = hdr
	if up.text == nil {
		return nil
	}
	th, err := off2f.ParseText(up.text)
	if err != nil {
		return fmt.Errorf("the text file: %w", err)
	}
	if err := hdr.CheckText(th); err != nil {
		return fmt.Errorf("the text file does not belong to the header file: %w", err)
	}
	return nil
}

func machineOf(goarch string) elf.Machine {
	switch goarch {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	case "riscv64":
		return elf.EM_RISCV
	}
	return elf.EM_NONE
}

func (u *Server) deploy(w http.ResponseWriter, r *http.Request) {
	up, err := u.readUpload(r)
	if err != nil {
		var br badRequest
		if errors.As(err, &br) {
			http.Error(w, err.Error(), http.StatusBadRequest)
		} else {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
		return
	}
	if !u.mu.TryLock() {
		http.Error(w, "another deploy or gc is running on this appliance; try again when it is done", http.StatusConflict)
		return
	}
	defer u.mu.Unlock()
	res, status, err := u.apply(up)
	if err != nil {
		u.logf("deploy of %s refused: %v", up.service, err)
		http.Error(w, err.Error(), status)
		return
	}
	reply(w, res)
}

// apply writes the program into the store and has the supervisor try it.
func (u *Server) apply(up *upload) (contract.DeployResult, int, error) {
	textHash := off2f.HashName(up.hdr.Note.Hash)
	res := contract.DeployResult{Service: up.service, Text: textHash, TextSent: up.text != nil,
		Previous: u.Programs.Current(up.service, u.Images[up.service])}
	var ierr error
	if err := u.Sup.Do(func() { res.Program, ierr = u.Programs.install(up.header, textHash, up.text) }); err != nil {
		return res, http.StatusServiceUnavailable, err
	}
	if ierr != nil {
		hint := ""
		if errors.Is(ierr, syscall.ENOSPC) {
			// Every deploy adds a text until a gc; the store is sized
			// for the image's texts plus room (TextStoreMiB).
			hint = "; the text store is full: remove what no service runs (nvboot deploy -gc), or build the image with a larger TextStoreMiB"
		}
		return res, http.StatusConflict, fmt.Errorf("writing the program into the text store (the service was not touched): %w%s", ierr, hint)
	}
	if res.Program == res.Previous {
		res.Result = contract.DeployUnchanged
		return res, 0, nil
	}
	name := up.service
	tr := u.Sup.Replace(name, up.deadline, u.Programs.Trial(name, res.Program, res.Previous))
	res.Result, res.Reason, res.Ready, res.Downtime = tr.Result, tr.Reason, tr.Ready, tr.Downtime
	if tr.Err != nil && tr.Result == "" {
		return res, http.StatusConflict, tr.Err
	}
	if tr.Err != nil {
		res.Reason = tr.Err.Error()
	}
	u.logf("deploy of %s: %s %s", name, res.Result, res.Reason)
	return res, 0, nil
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
