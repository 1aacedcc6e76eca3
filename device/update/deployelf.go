package update

import (
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
)

// The deploy of an image without a text store (the elf layout: a
// Raspberry Pi, an elf image on a PC). Its programs are whole static ELF
// files, so a deploy sends one, and keeps it on the state filesystem, the
// one writable filesystem such an image has (contract.ELFDeployDir):
// programs/ named by the SHA-256 of their bytes, services/ with the links,
// uploads/ while one is received; the same layout, switch, trial, boot
// recovery and lock as the text store's, and the same deploy path
// (deploy): what differs is elfDeploy's. The state is mounted read-write
// already, so a step needs no remount (Programs.writable runs it as it
// is), and the program is its own clean copy: there is no pmem text to
// repair.

// NewELFPrograms is the deploy store of an image without a text store, in
// dir on the state filesystem (contract.ELFDeployDir).
func NewELFPrograms(dir string) *Programs {
	return &Programs{Store: contract.TextStore{Dir: dir}, ELF: true}
}

// elfDeploy is a deploy of a whole static program into the state: no
// header file, the program staged as uploads/program and checked once
// whole.
var elfDeploy = deployKind{
	staged:     "program",
	foreign:    refuseOFF2F,
	sizes:      programSize,
	stageError: stateStoreError,
	check:      (*Server).checkWholeProgram,
	put:        (*Server).putELF,
}

// refuseOFF2F is the refusal of an OFF2F upload (or one of both kinds) by
// an appliance without a text store.
func refuseOFF2F(r *http.Request) error {
	if r.Header.Get(contract.HeaderProgramSize) == "" {
		return badRequest("this appliance has no text store (the elf layout): it takes a whole static program (%s), not an OFF2F header file and text; deploy with an nvboot that reads %s's %q", contract.HeaderProgramSize, contract.PathFeatures, contract.FeatureDeployELF)
	}
	if r.Header.Get(contract.HeaderHeaderSize) != "" || r.Header.Get(contract.HeaderTextSize) != "" {
		return badRequest("%s with %s or %s: a whole-program deploy has no header file or text", contract.HeaderProgramSize, contract.HeaderHeaderSize, contract.HeaderTextSize)
	}
	return nil
}

// programSize is a whole-program deploy's one size, the program's (no
// header file).
func programSize(r *http.Request) (hsize, tsize int64, err error) {
	v := r.Header.Get(contract.HeaderProgramSize)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > contract.MaxDeployBody {
		return 0, 0, badRequest("%s %q: want a byte count above 0 and up to %d; nothing was written", contract.HeaderProgramSize, v, contract.MaxDeployBody)
	}
	return 0, n, nil
}

// checkWholeProgram checks the staged program: one this appliance runs.
func (u *Server) checkWholeProgram(up *upload) error {
	return checkStaticProgram(up.text.path, runtime.GOARCH)
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

// putELF renames the checked program to programs/HASH, on the
// supervisor's goroutine.
func (u *Server) putELF(up *upload, res *contract.DeployResult) error {
	var ierr error
	if err := u.Sup.Do(func() { res.Program, ierr = u.Programs.installProgram(up.text, hex.EncodeToString(up.sum)) }); err != nil {
		return errorf(http.StatusServiceUnavailable, "%w", err)
	}
	if ierr != nil {
		return errorf(statusOf(stateStoreError(ierr)), "writing the program into %s (the service was not touched): %w", u.Programs.dir(), ierr)
	}
	return nil
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
	_, drop, err := p.programs()
	if err != nil {
		return res, err
	}
	counted, err := p.countFreed(&res.Bytes)
	if err != nil {
		return res, err
	}
	defer counted()
	if err := p.removePrograms(drop, &res.Removed); err != nil {
		return res, err
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
