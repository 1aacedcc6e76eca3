package update

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/off2f"
)

// A deploy's upload, of either kind (deployKind): an OFF2F program into
// the text store, or a whole static program into the state of an image
// without one (deployelf.go). Its headers are checked, the endpoint's lock
// taken and the store's free space checked before a byte of the body is
// read. A header file is then read into memory (at most
// contract.MaxDeployHeader: it is parsed whole), and the staged part (the
// text, or the whole program) streams through one fixed buffer
// (Limits.UploadBuffer) into the store's uploads directory, each full
// buffer written in its own read-write window of the store on the
// supervisor's goroutine, hashed and checked as it goes. Nothing outside
// uploads/ changes before the whole upload arrived and was checked; a
// refused, cut or stalled upload's staged part is removed before the
// answer, and one a power cut left is removed at the next boot
// (Programs.UseDeployed) or by a gc.

// pageSize is the unit of holes in a staged text, as in the store's own
// writes (zero 4 KiB pages are not written).
const pageSize = 4096

// upload is a deploy: what its headers announce, then what arrived.
type upload struct {
	kind         *deployKind
	service      string
	hsize, tsize int64  // the header file's size (0: a whole program), the staged part's
	sum          []byte // the body's SHA-256, as announced
	deadline     time.Duration
	header       []byte // the header file
	hdr          *off2f.Header
	text         *stagedText // the staged part in the store; nil: not sent
	textCheck    *textCheck  // the text's check, fed as it streamed; nil: no text
}

// deployKind is what differs between the two kinds of deploy; all else is
// one path (deploy): the service, hash, deadline and Content-Length, the
// lock, the room, the body through one buffer into uploads/, its length
// and hash, the answers, and the trial.
type deployKind struct {
	// staged is the staged part's name in uploads/ (and in logs).
	staged string
	// foreign refuses the other kind's upload, before any other check.
	foreign func(r *http.Request) error
	// sizes are the header file's and the staged part's, from the
	// headers, each checked.
	sizes func(r *http.Request) (hsize, tsize int64, err error)
	// streamText: the staged part is an OFF2F text, its header page and
	// hash checked as it streams (textCheck).
	streamText bool
	// stageError is the answer to a staging write that failed: it names
	// the store's filesystem and the image setting that sizes it.
	stageError func(error) error
	// check is the program's own check (400), once the body arrived whole
	// and hashed as announced.
	check func(u *Server, up *upload) error
	// put writes the checked program into the store and sets res.Program
	// (and res.Text); nothing is switched. Its error carries the answer's
	// status.
	put func(u *Server, up *upload, res *contract.DeployResult) error
}

// textDeploy is a deploy into the text store: the header file, then its
// text unless the store holds it.
var textDeploy = deployKind{
	staged:     "text",
	foreign:    refuseWholeProgram,
	sizes:      textSizes,
	streamText: true,
	stageError: storeError,
	check:      (*Server).checkProgram,
	put:        (*Server).putText,
}

// kind is the kind of deploy this appliance's store takes.
func (u *Server) kind() *deployKind {
	if u.Programs.ELF {
		return &elfDeploy
	}
	return &textDeploy
}

// deploy serves a deploy of either kind: the headers checked, the lock
// taken and the room asked before a byte of the body is read; then the
// body received and checked, the program put into the store, and tried.
func (u *Server) deploy(w http.ResponseWriter, r *http.Request) {
	up, err := u.deployHeaders(u.kind(), r)
	if err != nil {
		writeError(w, err)
		return
	}
	// Before the body: a second upload is refused unread, so at most one
	// is ever received.
	if !u.mu.TryLock() {
		http.Error(w, "another deploy, gc or update is running on this appliance; try again when it is done", http.StatusConflict)
		return
	}
	defer u.mu.Unlock()
	err = u.Programs.room(up.hsize + up.tsize)
	if err == nil {
		err = u.readUpload(r, up)
	}
	var res contract.DeployResult
	if err == nil {
		res, err = u.apply(up)
	}
	if err != nil {
		u.logf("deploy of %s refused: %v", up.service, err)
		writeError(w, err)
		return
	}
	reply(w, res)
}

func badRequest(format string, args ...any) error {
	return errorf(http.StatusBadRequest, format, args...)
}

// deployHeaders checks what a deploy's headers announce: the kind, the
// service, the sizes, the hash, the deadline, and the Content-Length
// against the sizes. Nothing of the body is read.
func (u *Server) deployHeaders(k *deployKind, r *http.Request) (*upload, error) {
	if err := k.foreign(r); err != nil {
		return nil, err
	}
	up := &upload{kind: k, service: r.Header.Get(contract.HeaderService)}
	if _, ok := u.Images[up.service]; !ok {
		return nil, badRequest("%s %q: no such service in this appliance's config", contract.HeaderService, up.service)
	}
	var err error
	if up.hsize, up.tsize, err = k.sizes(r); err != nil {
		return nil, err
	}
	up.sum, err = hex.DecodeString(r.Header.Get(contract.HeaderBodySHA256))
	if err != nil || len(up.sum) != sha256.Size {
		return nil, badRequest("%s %q: want 64 hex digits", contract.HeaderBodySHA256, r.Header.Get(contract.HeaderBodySHA256))
	}
	if up.deadline, err = contract.ParseReadyDeadline(r.Header.Get(contract.HeaderDeadline)); err != nil {
		return nil, badRequest("%w", err)
	}
	switch cl, total := r.ContentLength, up.hsize+up.tsize; {
	case cl >= 0 && cl < total:
		return nil, badRequest("truncated upload: %d of %d bytes (the request's Content-Length); nothing was written", cl, total)
	case cl > total:
		return nil, badRequest("upload longer than the %d bytes announced (Content-Length %d); nothing was written", total, cl)
	}
	return up, nil
}

// refuseWholeProgram is the text store's refusal of a whole program.
func refuseWholeProgram(r *http.Request) error {
	if r.Header.Get(contract.HeaderProgramSize) != "" {
		return badRequest("this appliance deploys OFF2F programs into its text store (a header file and its text), not a whole program (%s)", contract.HeaderProgramSize)
	}
	return nil
}

// textSizes are a text store deploy's sizes: a header file, not empty,
// and a text (0: the store holds it).
func textSizes(r *http.Request) (hsize, tsize int64, err error) {
	size := func(h string) (int64, error) {
		n, err := strconv.ParseInt(r.Header.Get(h), 10, 64)
		if err != nil || n < 0 || n > contract.MaxDeployBody {
			return 0, badRequest("%s %q: want a byte count up to %d", h, r.Header.Get(h), contract.MaxDeployBody)
		}
		return n, nil
	}
	if hsize, err = size(contract.HeaderHeaderSize); err != nil {
		return 0, 0, err
	}
	if tsize, err = size(contract.HeaderTextSize); err != nil {
		return 0, 0, err
	}
	switch {
	case hsize == 0 || hsize+tsize > contract.MaxDeployBody:
		return 0, 0, badRequest("upload of %d+%d bytes: the header file is empty, or the whole is above %d bytes", hsize, tsize, contract.MaxDeployBody)
	case hsize > contract.MaxDeployHeader:
		return 0, 0, badRequest("the header file is %d bytes; this appliance takes header files up to %d bytes (it holds one in memory to check it); nothing was written", hsize, contract.MaxDeployHeader)
	}
	return hsize, tsize, nil
}

// readUpload receives a deploy's body: the header file into memory, the
// staged part into the store's uploads directory, then checks it: exactly
// as long as announced, the announced hash, then the program itself (the
// kind's check). On an error the staged part is gone again.
func (u *Server) readUpload(r *http.Request, up *upload) (retErr error) {
	k := up.kind
	total := up.hsize + up.tsize
	body := sha256.New()
	up.header = make([]byte, up.hsize)
	n, err := io.ReadFull(r.Body, up.header)
	body.Write(up.header[:n])
	if err != nil {
		return cutUpload(int64(n), total, err)
	}
	if up.tsize > 0 {
		st, err := u.Programs.newStage(u.Sup, u.Limits.withDefaults().UploadBuffer, k.staged)
		if err != nil {
			return k.stageError(err)
		}
		defer func() {
			if retErr != nil {
				u.unstage(up.service, st)
			}
		}()
		var sum io.Writer = body
		if k.streamText {
			up.textCheck = &textCheck{}
			sum = io.MultiWriter(body, up.textCheck)
		}
		if err := receiveText(r.Body, st, up.tsize, sum); err != nil {
			var rerr *readError
			if errors.As(err, &rerr) {
				return cutUpload(up.hsize+rerr.got, total, rerr.err)
			}
			return k.stageError(err)
		}
		up.text = st
	}
	if m, _ := r.Body.Read(make([]byte, 1)); m > 0 {
		return badRequest("upload longer than the %d bytes announced; nothing was written", total)
	}
	if got := body.Sum(nil); !bytes.Equal(got, up.sum) {
		return badRequest("upload hash mismatch: the body hashes to %x, the sender said %x (damaged in transit?); nothing was written", got, up.sum)
	}
	if err := k.check(u, up); err != nil {
		return badRequest("%w; nothing was written", err)
	}
	return nil
}

// unstage removes a refused upload's staged part, before the answer.
func (u *Server) unstage(service string, st *stagedText) {
	if err := st.remove(); err != nil {
		u.logf("deploy of %s: removing its staged %s: %v", service, filepath.Base(st.path), err)
	}
}

// readError is the body's failure while a text was received, after got
// of its bytes.
type readError struct {
	got int64
	err error
}

func (e *readError) Error() string { return e.err.Error() }

// receiveText reads size bytes of r straight into st's buffer, each byte
// also written to sum, and ends st: a *readError when r fails or ends
// early, st's own error otherwise.
func receiveText(r io.Reader, st *stagedText, size int64, sum io.Writer) error {
	var got int64
	for got < size {
		b := st.space()
		b = b[:min(int64(len(b)), size-got)]
		n, err := r.Read(b)
		sum.Write(b[:n])
		got += int64(n)
		if ferr := st.filled(n); ferr != nil {
			return ferr
		}
		if err == io.EOF && got < size {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && err != io.EOF {
			return &readError{got, err}
		}
	}
	return st.finish(size)
}

// cutUpload is the answer to a body that ended or stalled after got of
// want bytes.
func cutUpload(got, want int64, err error) error {
	if isStall(err) {
		return errorf(http.StatusRequestTimeout, "%v, after %d of %d bytes; nothing was written", err, got, want)
	}
	return errorf(http.StatusBadRequest, "truncated upload: %d of %d bytes arrived (%v); nothing was written", got, want, err)
}

// storeError is the answer to a staging write that failed.
func storeError(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		// Every deploy adds a text until a gc; the store is sized for the
		// image's texts plus room (TextStoreMiB).
		return errorf(http.StatusInsufficientStorage, "%w; the text store is full: remove what no service runs (nvboot deploy -gc), or build the image with a larger TextStoreMiB; nothing was written", err)
	}
	return errorf(http.StatusInternalServerError, "%w; nothing was written", err)
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
	if up.textCheck == nil {
		return nil
	}
	th, err := up.textCheck.result()
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

// textCheck is off2f.ParseText's check of a text file fed as it streams:
// its header page is decoded once it arrived, then the bytes of its
// segments (in file order, which the page's checks ensure) are hashed.
type textCheck struct {
	page [off2f.TextHeaderSize]byte
	n    int64 // bytes written
	th   *off2f.TextHeader
	h    hash.Hash
	seg  int
	err  error // the header page's
}

func (c *textCheck) Write(b []byte) (int, error) {
	all := len(b)
	if c.n < int64(len(c.page)) {
		k := copy(c.page[c.n:], b)
		c.n, b = c.n+int64(k), b[k:]
		if c.n == int64(len(c.page)) {
			var th off2f.TextHeader
			if c.err = th.UnmarshalBinary(c.page[:]); c.err == nil {
				c.th, c.h = &th, off2f.NewTextHash(th.Machine, th.Flags, th.OrigPhdr, th.OrigPhnum, th.Segments)
			}
		}
	}
	for len(b) > 0 && c.th != nil && c.seg < len(c.th.Segments) {
		s := c.th.Segments[c.seg]
		start, end := int64(s.Offset), int64(s.Offset+s.Memsz)
		switch {
		case c.n >= end:
			c.seg++
			continue
		case c.n < start:
			k := min(start-c.n, int64(len(b)))
			c.n, b = c.n+k, b[k:]
			continue
		}
		k := min(end-c.n, int64(len(b)))
		c.h.Write(b[:k])
		c.n, b = c.n+k, b[k:]
	}
	c.n += int64(len(b))
	return all, nil
}

// result is the text's header once the whole text was written, or why it
// is not a whole, undamaged text.
func (c *textCheck) result() (*off2f.TextHeader, error) {
	switch {
	case c.err != nil:
		return nil, c.err
	case c.th == nil:
		return nil, fmt.Errorf("text file is %d bytes, shorter than its %d-byte header page", c.n, off2f.TextHeaderSize)
	case c.th.Size != uint64(c.n):
		return nil, fmt.Errorf("text file is %d bytes, its header says %d", c.n, c.th.Size)
	}
	var got [32]byte
	c.h.Sum(got[:0])
	if got != c.th.Hash {
		return nil, fmt.Errorf("text content hash %s does not match the header's %s", off2f.HashName(got), off2f.HashName(c.th.Hash))
	}
	return c.th, nil
}

// stagedText is a deploy's text on its way into the store: received into
// buf and written at its offset into uploads/text, each full buffer in one
// read-write window of the store on the supervisor's goroutine, so the
// store is writable only for a local write and the supervisor is never
// held by the network. Zero pages are left as holes, as the store's own
// writes leave them.
type stagedText struct {
	p    *Programs
	sup  Supervisor
	path string
	buf  []byte
	off  int64 // the file offset of buf[0]
}

// newStage starts a staged part, uploads/NAME, empty, with a buffer of
// size bytes.
func (p *Programs) newStage(sup Supervisor, size int, name string) (*stagedText, error) {
	s := &stagedText{p: p, sup: sup, path: filepath.Join(p.uploadsDir(), name), buf: make([]byte, 0, size)}
	err := s.window(func() error {
		if err := os.MkdirAll(p.uploadsDir(), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		return f.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("staging the text in %s: %w", s.path, err)
	}
	return s, nil
}

// window runs f with the store writable, on the supervisor's goroutine.
func (s *stagedText) window(f func() error) error {
	var werr error
	if err := s.sup.Do(func() { werr = s.p.writable(f) }); err != nil {
		return err
	}
	return werr
}

// space is the free part of the buffer, to read into.
func (s *stagedText) space() []byte { return s.buf[len(s.buf):cap(s.buf)] }

// filled takes n bytes read into space(); a full buffer goes to the store.
func (s *stagedText) filled(n int) error {
	s.buf = s.buf[:len(s.buf)+n]
	if len(s.buf) < cap(s.buf) {
		return nil
	}
	return s.flush(-1)
}

// finish writes what the buffer holds and ends the text at size bytes,
// synced: what install renames into place.
func (s *stagedText) finish(size int64) error { return s.flush(size) }

// flush writes the buffer at its offset; with size >= 0 the file is then
// cut to size and synced.
func (s *stagedText) flush(size int64) error {
	err := s.window(func() error {
		f, err := os.OpenFile(s.path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := writeSparseAt(f, s.buf, s.off); err != nil {
			return err
		}
		if size >= 0 {
			if err := f.Truncate(size); err != nil {
				return err
			}
			if err := f.Sync(); err != nil {
				return err
			}
		}
		return f.Close()
	})
	s.off += int64(len(s.buf))
	s.buf = s.buf[:0]
	if err != nil {
		return fmt.Errorf("staging the text in %s: %w", s.path, err)
	}
	return nil
}

// remove drops the staged text (and the uploads directory).
func (s *stagedText) remove() error {
	return s.window(func() error {
		_, _, err := s.p.dropUploads()
		return err
	})
}

// writeSparseAt writes b at off, page by page, leaving zero pages
// unwritten (b starts on a page boundary of the file).
func writeSparseAt(f *os.File, b []byte, off int64) error {
	var zero [pageSize]byte
	for i := 0; i < len(b); i += pageSize {
		p := b[i:min(i+pageSize, len(b))]
		if len(p) == pageSize && bytes.Equal(p, zero[:]) {
			continue
		}
		if _, err := f.WriteAt(p, off+int64(i)); err != nil {
			return err
		}
	}
	return nil
}

// apply puts the checked program into the store (the kind's put) and has
// the supervisor try it. An error carries the answer's status.
func (u *Server) apply(up *upload) (contract.DeployResult, error) {
	res := contract.DeployResult{Service: up.service, TextSent: up.text != nil,
		Previous: u.Programs.Current(up.service, u.Images[up.service])}
	if err := up.kind.put(u, up, &res); err != nil {
		return res, err
	}
	if res.Program == res.Previous {
		res.Result = contract.DeployUnchanged
		return res, nil
	}
	name := up.service
	tr := u.Sup.Replace(name, up.deadline, u.Programs.Trial(name, res.Program, res.Previous))
	res.Result, res.Reason, res.Ready, res.Downtime = tr.Result, tr.Reason, tr.Ready, tr.Downtime
	if tr.Err != nil && tr.Result == "" {
		return res, errorf(http.StatusConflict, "%w", tr.Err)
	}
	if tr.Err != nil {
		res.Reason = tr.Err.Error()
	}
	u.logf("deploy of %s: %s %s", name, res.Result, res.Reason)
	return res, nil
}

// putText writes an OFF2F program into the text store: its text's clean
// copy first, off the supervisor's goroutine (it reads the whole text):
// the program names it, and is written only once it is durable. Then, on
// the supervisor's goroutine, the staged text and the header file.
func (u *Server) putText(up *upload, res *contract.DeployResult) error {
	res.Text = off2f.HashName(up.hdr.Note.Hash)
	fallback, err := u.Programs.cleanCopy(up.hdr, up.text)
	var header []byte
	if err == nil {
		header, err = off2f.WithFallbackDir(up.header, fallback)
	}
	if err != nil {
		// Refused: the staged text goes before the answer, as for any
		// refused upload.
		if up.text != nil {
			u.unstage(up.service, up.text)
		}
		return err
	}
	var ierr error
	if err := u.Sup.Do(func() { res.Program, ierr = u.Programs.install(header, res.Text, up.text) }); err != nil {
		return errorf(http.StatusServiceUnavailable, "%w", err)
	}
	if ierr != nil {
		status, hint := http.StatusConflict, ""
		if errors.Is(ierr, syscall.ENOSPC) {
			status = http.StatusInsufficientStorage
			hint = "; the text store is full: remove what no service runs (nvboot deploy -gc), or build the image with a larger TextStoreMiB"
		}
		return errorf(status, "writing the program into the text store (the service was not touched): %w%s", ierr, hint)
	}
	return nil
}
