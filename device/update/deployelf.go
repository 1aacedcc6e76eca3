package update

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/internal/dirsync"
)

// The deploy of an image without a text store (the elf layout: a
// Raspberry Pi, an elf image on a PC). Its programs are whole static ELF
// files, so a deploy sends one, and keeps it on the state filesystem, the
// one writable filesystem such an image has (contract.ELFDeployDir):
// programs/ named by the SHA-256 of their bytes, services/ with the links,
// uploads/ while one is received; the same layout, switch, trial, boot
// recovery and lock as the text store's. The state is mounted read-write
// already, so a step needs no remount (Programs.writable runs it as it
// is), and the program is its own clean copy: there is no pmem text to
// repair.

// NewELFPrograms is the deploy store of an image without a text store, in
// dir on the state filesystem (contract.ELFDeployDir).
func NewELFPrograms(dir string) *Programs {
	return &Programs{Store: contract.TextStore{Dir: dir}, ELF: true}
}

// deployELF is a whole-program deploy: its headers are checked, the lock
// taken and the state's free space asked before a byte of the body is
// read; the body streams through one buffer into uploads/program, hashed;
// the program is checked (the announced length and hash, an executable
// static ELF for this machine), renamed to programs/HASH, and tried.
func (u *Server) deployELF(w http.ResponseWriter, r *http.Request) {
	up, err := u.deployELFHeaders(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if !u.mu.TryLock() {
		http.Error(w, "another deploy, gc or update is running on this appliance; try again when it is done", http.StatusConflict)
		return
	}
	defer u.mu.Unlock()
	if err := u.Programs.room(up.tsize); err != nil {
		u.logf("deploy of %s refused: %v", up.service, err)
		writeError(w, err)
		return
	}
	if err := u.readProgram(r, up); err != nil {
		u.logf("deploy of %s refused: %v", up.service, err)
		writeError(w, err)
		return
	}
	res, status, err := u.applyELF(up)
	if err != nil {
		u.logf("deploy of %s refused: %v", up.service, err)
		http.Error(w, err.Error(), status)
		return
	}
	reply(w, res)
}

// deployELFHeaders checks a whole-program deploy's headers; the program's
// size is kept in tsize. Nothing of the body is read.
func (u *Server) deployELFHeaders(r *http.Request) (*upload, error) {
	bad := func(format string, args ...any) error { return errorf(http.StatusBadRequest, format, args...) }
	if r.Header.Get(contract.HeaderProgramSize) == "" {
		return nil, bad("this appliance has no text store (the elf layout): it takes a whole static program (%s), not an OFF2F header file and text; deploy with an nvboot that reads %s's %q", contract.HeaderProgramSize, contract.PathFeatures, contract.FeatureDeployELF)
	}
	if r.Header.Get(contract.HeaderHeaderSize) != "" || r.Header.Get(contract.HeaderTextSize) != "" {
		return nil, bad("%s with %s or %s: a whole-program deploy has no header file or text", contract.HeaderProgramSize, contract.HeaderHeaderSize, contract.HeaderTextSize)
	}
	up := &upload{service: r.Header.Get(contract.HeaderService)}
	if _, ok := u.Images[up.service]; !ok {
		return nil, bad("%s %q: no such service in this appliance's config", contract.HeaderService, up.service)
	}
	v := r.Header.Get(contract.HeaderProgramSize)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > contract.MaxDeployBody {
		return nil, bad("%s %q: want a byte count above 0 and up to %d; nothing was written", contract.HeaderProgramSize, v, contract.MaxDeployBody)
	}
	up.tsize = n
	up.sum, err = hex.DecodeString(r.Header.Get(contract.HeaderBodySHA256))
	if err != nil || len(up.sum) != sha256.Size {
		return nil, bad("%s %q: want 64 hex digits", contract.HeaderBodySHA256, r.Header.Get(contract.HeaderBodySHA256))
	}
	if up.deadline, err = contract.ParseReadyDeadline(r.Header.Get(contract.HeaderDeadline)); err != nil {
		return nil, errorf(http.StatusBadRequest, "%w", err)
	}
	switch cl := r.ContentLength; {
	case cl >= 0 && cl < n:
		return nil, bad("truncated upload: %d of %d bytes (the request's Content-Length); nothing was written", cl, n)
	case cl > n:
		return nil, bad("upload longer than the %d bytes announced (Content-Length %d); nothing was written", n, cl)
	}
	return up, nil
}

// readProgram receives a whole-program deploy's body into uploads/ and
// checks it: exactly as long as announced, the announced hash, a program
// this appliance can run. On an error the staged program is gone again.
func (u *Server) readProgram(r *http.Request, up *upload) (retErr error) {
	st, err := u.Programs.newStageNamed(u.Sup, u.Limits.withDefaults().UploadBuffer, "program")
	if err != nil {
		return stateStoreError(err)
	}
	defer func() {
		if retErr != nil {
			if rerr := st.remove(); rerr != nil {
				u.logf("deploy of %s: removing its staged program: %v", up.service, rerr)
			}
		}
	}()
	body := sha256.New()
	if err := receiveText(r.Body, st, up.tsize, body); err != nil {
		var rerr *readError
		if errors.As(err, &rerr) {
			return cutUpload(rerr.got, up.tsize, rerr.err)
		}
		return stateStoreError(err)
	}
	if m, _ := r.Body.Read(make([]byte, 1)); m > 0 {
		return errorf(http.StatusBadRequest, "upload longer than the %d bytes announced; nothing was written", up.tsize)
	}
	if got := body.Sum(nil); !bytes.Equal(got, up.sum) {
		return errorf(http.StatusBadRequest, "upload hash mismatch: the body hashes to %x, the sender said %x (damaged in transit?); nothing was written", got, up.sum)
	}
	if err := checkStaticProgram(st.path, runtime.GOARCH); err != nil {
		return errorf(http.StatusBadRequest, "%w; nothing was written", err)
	}
	up.text = st
	return nil
}

// checkStaticProgram checks that the file at path is a program this
// appliance runs without a loader: an ELF executable for goarch's machine
// with no interpreter.
func checkStaticProgram(path, goarch string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("the program is not an ELF file: %w", err)
	}
	defer f.Close()
	if want := machineOf(goarch); f.Machine != want {
		return fmt.Errorf("the program is built for %v, this appliance is %s (%v): build it for %s", f.Machine, goarch, want, goarch)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("the program is an ELF %v, not an executable", f.Type)
	}
	loads := 0
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			interp, _ := io.ReadAll(io.LimitReader(p.Open(), 4096))
			name := strings.TrimRight(string(interp), "\x00")
			if filepath.Clean(name) == contract.Loader {
				return fmt.Errorf("the program is an OFF2F header file (its interpreter is %s): this appliance has no text store and runs whole static programs", name)
			}
			return fmt.Errorf("the program is dynamically linked (interpreter %s): this appliance runs static programs only (build with CGO_ENABLED=0)", name)
		case elf.PT_LOAD:
			loads++
		}
	}
	if loads == 0 {
		return errors.New("the program has no loadable segment")
	}
	return nil
}

// applyELF puts the checked program under its hash and has the
// supervisor try it.
func (u *Server) applyELF(up *upload) (contract.DeployResult, int, error) {
	res := contract.DeployResult{Service: up.service, TextSent: true,
		Previous: u.Programs.Current(up.service, u.Images[up.service])}
	var ierr error
	if err := u.Sup.Do(func() { res.Program, ierr = u.Programs.installProgram(up.text, hex.EncodeToString(up.sum)) }); err != nil {
		return res, http.StatusServiceUnavailable, err
	}
	if ierr != nil {
		return res, statusOf(stateStoreError(ierr)), fmt.Errorf("writing the program into %s (the service was not touched): %w", u.Programs.dir(), ierr)
	}
	if res.Program == res.Previous {
		res.Result = contract.DeployUnchanged
		return res, 0, nil
	}
	tr := u.Sup.Replace(up.service, up.deadline, u.Programs.Trial(up.service, res.Program, res.Previous))
	res.Result, res.Reason, res.Ready, res.Downtime = tr.Result, tr.Reason, tr.Ready, tr.Downtime
	if tr.Err != nil && tr.Result == "" {
		return res, http.StatusConflict, tr.Err
	}
	if tr.Err != nil {
		res.Reason = tr.Err.Error()
	}
	u.logf("deploy of %s: %s %s", up.service, res.Result, res.Reason)
	return res, 0, nil
}

// installProgram renames a staged, checked and synced program to
// programs/NAME (kept when a file of that name is there: the name is its
// hash, and a running program may be it), the directory synced; uploads/
// is gone afterwards, whatever happened. It returns the program's path.
func (p *Programs) installProgram(st *stagedText, name string) (string, error) {
	path := filepath.Join(p.programsDir(), name)
	err := p.writable(func() error {
		err := p.putProgram(st.path, path)
		if _, _, derr := p.dropUploads(); derr != nil && err == nil {
			err = derr
		}
		return err
	})
	return path, err
}

func (p *Programs) putProgram(staged, path string) error {
	if err := os.MkdirAll(p.programsDir(), 0o755); err != nil {
		return err
	}
	if _, err := os.Lstat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return installStaged(staged, path, 0o555)
}

// gcELF removes the programs no link names and what an interrupted upload
// left; refused while a trial is open.
func (p *Programs) gcELF() (contract.GCResult, error) {
	res := contract.GCResult{Removed: []string{}}
	used, err := p.linked()
	if err != nil {
		return res, err
	}
	progs, err := os.ReadDir(p.programsDir())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, err
	}
	before, err := freeBytes(p.dir())
	if err != nil {
		return res, err
	}
	defer func() {
		if after, err := freeBytes(p.dir()); err == nil {
			res.Bytes = max(after-before, 0)
		}
	}()
	for _, de := range progs {
		if used[de.Name()] {
			continue
		}
		path := filepath.Join(p.programsDir(), de.Name())
		if err := os.Remove(path); err != nil {
			return res, err
		}
		res.Removed = append(res.Removed, path)
	}
	if len(res.Removed) > 0 {
		if err := dirsync.Sync(p.programsDir()); err != nil {
			return res, err
		}
	}
	up, _, err := p.dropUploads()
	res.Removed = append(res.Removed, up...)
	return res, err
}

// stateStoreError is the answer to a write into the deploy store on the
// state that failed.
func stateStoreError(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return errorf(http.StatusInsufficientStorage, "%w; the state is full: remove what no service runs (nvboot deploy -gc), or build the image with a larger StateMiB; nothing was written", err)
	}
	return errorf(http.StatusInternalServerError, "%w; nothing was written", err)
}
