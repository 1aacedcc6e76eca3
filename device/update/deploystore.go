package update

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/internal/atomicfile"
	"github.com/nvboot/nvboot/internal/dirsync"
	"github.com/nvboot/nvboot/off2f"
)

// Mounter is mount(2), for the store's remounts; tests pass a fake.
type Mounter interface {
	Mount(source, target, fstype string, flags uintptr, data string) error
}

// Programs is the store's side of a deploy: deployed header files in
// programs/ named by their SHA-256, one link per deployed service in
// services/, the texts beside them (contract.ProgramsDir, contract.ServicesDir),
// and the texts' clean copies off the store (cleancopy.go).
// The store is mounted read-only; every change here happens between a
// remount read-write and one read-only, on the supervisor's goroutine (as a
// text repair does), so no service starts while its program is switched.
type Programs struct {
	Store   contract.TextStore
	Mounter Mounter
	// Images are the services' programs as built (their config Path), by
	// name: what a service without a link runs.
	Images map[string]string
	// CleanDir is where the clean copies of deployed texts the image
	// lacks are kept: CleanDirIn the state filesystem's mount point. "":
	// the state is not mounted, and a deploy of such a text is refused.
	CleanDir string
	// ImageFallback is the image's clean copies of its own texts on the
	// root filesystem; "": contract.FallbackDir.
	ImageFallback string
	// ELF: the store is a directory on the state filesystem holding whole
	// static programs (NewELFPrograms, deployelf.go), not a text store;
	// it is read-write already, and Mounter is unused.
	ELF bool

	// statfs gives the free bytes of the store's filesystem; nil:
	// statfs(2). Tests fill a store without filling the disk.
	statfs func(dir string) (int64, error)
}

func (p *Programs) dir() string { return p.Store.DirOrDefault() }
func (p *Programs) programsDir() string {
	return filepath.Join(p.dir(), filepath.Base(contract.ProgramsDir))
}
func (p *Programs) servicesDir() string {
	return filepath.Join(p.dir(), filepath.Base(contract.ServicesDir))
}

// uploadsDir holds the text of the one deploy being received
// (stagedText); nothing else reads it, and what a refused or interrupted
// upload left there is removed.
func (p *Programs) uploadsDir() string { return filepath.Join(p.dir(), "uploads") }

// Link is the path of service name's link (which may not exist).
func (p *Programs) Link(name string) string { return filepath.Join(p.servicesDir(), name) }

// Current returns what service name runs: the target of its link, or
// image (its program as built) when it has none.
func (p *Programs) Current(name, image string) string {
	if t, err := os.Readlink(p.Link(name)); err == nil {
		return t
	}
	return image
}

// have returns those of hashes the store holds as text files with a clean
// copy (cleanCopy): a text without one is to be sent, so that a deploy
// never has to take its clean copy from the store's, maybe damaged, text.
func (p *Programs) have(hashes []string) []string {
	have := []string{}
	for _, h := range hashes {
		if !contract.IsTextHash(h) {
			continue
		}
		if isRegular(filepath.Join(p.dir(), h)) && p.hasCleanCopy(h) {
			have = append(have, h)
		}
	}
	return have
}

// writable runs f with the store mounted read-write, and mounts it
// read-only again whatever f did.
func (p *Programs) writable(f func() error) error {
	if p.ELF {
		return f()
	}
	s := &p.Store
	if err := p.Mounter.Mount(s.Device, s.DirOrDefault(), s.FSTypeOrDefault(), syscall.MS_REMOUNT, s.OptionsOrDefault()); err != nil {
		return fmt.Errorf("remounting the text store %s read-write: %w", s.DirOrDefault(), err)
	}
	ferr := f()
	if err := p.Mounter.Mount(s.Device, s.DirOrDefault(), s.FSTypeOrDefault(), syscall.MS_REMOUNT|syscall.MS_RDONLY, s.OptionsOrDefault()); err != nil {
		return errors.Join(ferr, fmt.Errorf("remounting the text store %s read-only (it stays read-write until the next boot): %w", s.DirOrDefault(), err))
	}
	return ferr
}

// install puts a checked program into the store: its staged text (when
// sent; else the store must hold it) renamed to its hash, its header file
// written under the SHA-256 of its bytes. Both are atomic and kept when
// the same bytes are there; nothing is switched. The uploads directory is
// gone afterwards, whatever happened. It returns the header file's path.
func (p *Programs) install(header []byte, textHash string, text *stagedText) (string, error) {
	sum := sha256.Sum256(header)
	path := filepath.Join(p.programsDir(), hex.EncodeToString(sum[:]))
	err := p.writable(func() error {
		err := p.installIn(header, path, textHash, text)
		if text != nil {
			if _, _, derr := p.dropUploads(); derr != nil && err == nil {
				err = derr
			}
		}
		return err
	})
	return path, err
}

func (p *Programs) installIn(header []byte, path, textHash string, text *stagedText) error {
	if text != nil {
		if err := p.putStaged(text.path, textHash); err != nil {
			return fmt.Errorf("writing text %s: %w", textHash, err)
		}
	} else if len(p.have([]string{textHash})) == 0 {
		return fmt.Errorf("the store lacks text %s and the upload did not carry it", textHash)
	}
	if err := os.MkdirAll(p.programsDir(), 0o755); err != nil {
		return err
	}
	if b, err := os.ReadFile(path); err == nil && string(b) == string(header) {
		return nil
	}
	if err := atomicfile.WriteFile(path, header, 0o555); err != nil {
		return fmt.Errorf("writing program %s: %w", path, err)
	}
	return nil
}

// putStaged renames a staged, checked and synced text into the store
// under its hash. A text already there with the same size and header page
// is kept, as off2f.Store.Put keeps it: a running program may map it.
func (p *Programs) putStaged(staged, name string) error {
	if !contract.IsTextHash(name) {
		return fmt.Errorf("%q is not a text file name (64 hex digits)", name)
	}
	final := filepath.Join(p.dir(), name)
	if same, err := sameText(final, staged); err != nil || same {
		return err
	}
	return installStaged(staged, final, 0o444)
}

// installStaged puts a staged file, checked and fsynced, in place as
// final: its mode first, then the rename, then an fsync of final's
// directory. Wherever a power cut falls, final is either as it was (the
// staged file left in uploads/, which the next boot removes) or the whole
// new file with its mode; the rename is durable once the directory is
// synced.
func installStaged(staged, final string, mode os.FileMode) error {
	if err := os.Chmod(staged, mode); err != nil {
		return err
	}
	if err := os.Rename(staged, final); err != nil {
		return err
	}
	return dirsync.Sync(filepath.Dir(final))
}

// sameText says whether the text at path exists with staged's size and
// header page (which holds its content hash).
func sameText(path, staged string) (bool, error) {
	page := func(name string) ([]byte, int64, error) {
		f, err := os.Open(name)
		if err != nil {
			return nil, 0, err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, 0, err
		}
		b := make([]byte, off2f.TextHeaderSize)
		n, err := f.ReadAt(b, 0)
		if err != nil && err != io.EOF {
			return nil, 0, err
		}
		return b[:n], st.Size(), nil
	}
	have, hsize, err := page(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking %s: %w", path, err)
	}
	want, wsize, err := page(staged)
	if err != nil {
		return false, err
	}
	return hsize == wsize && bytes.Equal(have, want), nil
}

// dropUploads removes the uploads directory and what it holds, returning
// what it removed. Only with the store writable.
func (p *Programs) dropUploads() (removed []string, size int64, err error) {
	dir := p.uploadsDir()
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	for _, de := range des {
		path := filepath.Join(dir, de.Name())
		if st, err := os.Lstat(path); err == nil {
			size += st.Size()
		}
		if err := os.RemoveAll(path); err != nil {
			return removed, size, err
		}
		removed = append(removed, path)
	}
	if err := os.Remove(dir); err != nil {
		return removed, size, err
	}
	return removed, size, dirsync.Sync(p.dir())
}

// room refuses an upload of need bytes the store has no room for, before
// its body is read.
func (p *Programs) room(need int64) error {
	statfs := p.statfs
	if statfs == nil {
		statfs = freeBytes
	}
	what, size := "the text store", "TextStoreMiB"
	if p.ELF {
		what, size = "the deploy store on the state", "StateMiB"
	}
	free, err := statfs(p.dir())
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, p.dir(), err)
	}
	if need > free {
		return errorf(http.StatusInsufficientStorage, "the upload is %d bytes, %s %s has %d bytes free: remove what no service runs (nvboot deploy -gc), or build the image with a larger %s; nothing was written", need, what, p.dir(), free, size)
	}
	return nil
}

// switchTo makes service name run program: first SERVICE.trial, a link to
// what it runs now (prev), then the rename of a new link over SERVICE. A
// power cut before the rename leaves the old link and a trial that
// recoverTrials undoes; after it, the new link and the trial, which
// recoverTrials also undoes: a program is kept only by keep.
func (p *Programs) switchTo(name, program, prev string) error {
	return p.writable(func() error {
		if err := os.MkdirAll(p.servicesDir(), 0o755); err != nil {
			return err
		}
		if err := p.symlinkAtomic(prev, p.Link(name)+contract.TrialSuffix); err != nil {
			return err
		}
		if err := dirsync.Sync(p.servicesDir()); err != nil {
			return err
		}
		if err := p.symlinkAtomic(program, p.Link(name)); err != nil {
			return err
		}
		return dirsync.Sync(p.servicesDir())
	})
}

// Trial is the store's side of a trial of program for service name, prev
// being what it runs now: the supervisor calls each step with the service
// stopped (Keep: running and ready).
func (p *Programs) Trial(name, program, prev string) TrialOps {
	return TrialOps{
		Path:   p.Link(name),
		Switch: func() error { return p.switchTo(name, program, prev) },
		Keep:   func() error { return p.keep(name) },
		Revert: func() error { return p.switchBack(name) },
	}
}

// keep ends service name's trial: the new program stays.
func (p *Programs) keep(name string) error {
	return p.writable(func() error {
		if err := os.Remove(p.Link(name) + contract.TrialSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return dirsync.Sync(p.servicesDir())
	})
}

// switchBack undoes service name's trial: SERVICE.trial is renamed over
// SERVICE, so the program that ran before runs again.
func (p *Programs) switchBack(name string) error {
	return p.writable(func() error { return p.revert(name) })
}

func (p *Programs) revert(name string) error {
	if err := os.Rename(p.Link(name)+contract.TrialSuffix, p.Link(name)); err != nil {
		return fmt.Errorf("switching %s back: %w", name, err)
	}
	return dirsync.Sync(p.servicesDir())
}

// recoverTrials undoes every trial a power cut or a crash interrupted, and
// returns the services it switched back. Run at boot, before any service
// starts; nothing is written when there is no trial.
func (p *Programs) recoverTrials() ([]string, error) {
	des, err := os.ReadDir(p.servicesDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, de := range des {
		if n, ok := strings.CutSuffix(de.Name(), contract.TrialSuffix); ok {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	err = p.writable(func() error {
		var errs []error
		for _, n := range names {
			errs = append(errs, p.revert(n))
		}
		return errors.Join(errs...)
	})
	return names, err
}

// symlinkAtomic makes path a link to target: a new link beside it renamed
// over it.
func (p *Programs) symlinkAtomic(target, path string) error {
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// gc removes the deployed programs no service link names and the texts
// neither the image's MANIFEST nor a kept program needs, then the
// leftovers of interrupted writes (off2f.Store.GC) and of an interrupted
// upload, then the clean copies no kept program's text needs. What runs
// is what the links name (or the image's programs), so nothing running
// loses its text or its clean copy. It is refused while a trial is open.
func (p *Programs) gc() (contract.GCResult, error) {
	if p.ELF {
		return p.gcELF()
	}
	res := contract.GCResult{Removed: []string{}}
	kept, drop, err := p.programs()
	if err != nil {
		return res, err
	}
	var texts []string
	for _, path := range kept {
		raw, err := os.ReadFile(path)
		if err != nil {
			return res, err
		}
		h, err := off2f.ParseHeader(raw)
		if err != nil {
			return res, fmt.Errorf("program %s: %w; refusing gc (nothing removed)", path, err)
		}
		texts = append(texts, off2f.HashName(h.Note.Hash))
	}
	sort.Strings(texts)
	// The kept programs' texts as a second manifest, beside the image's.
	keep, err := os.CreateTemp("", "deployed-MANIFEST-")
	if err != nil {
		return res, err
	}
	keep.Close()
	defer os.Remove(keep.Name())
	manifests := []string{filepath.Join(p.dir(), off2f.ManifestName)}
	if len(texts) > 0 {
		if err := off2f.WriteManifest(keep.Name(), texts); err != nil {
			return res, err
		}
		manifests = append(manifests, keep.Name())
	}
	err = p.writable(func() error {
		// What the store got back, whatever gc ends on.
		counted, err := p.countFreed(&res.Bytes)
		if err != nil {
			return err
		}
		defer counted()
		if err := p.removePrograms(drop, &res.Removed); err != nil {
			return err
		}
		gone, err := (off2f.Store{Dir: p.dir()}).GC(manifests)
		for _, e := range gone {
			res.Removed = append(res.Removed, filepath.Join(p.dir(), e.Name))
		}
		if err != nil {
			return err
		}
		// An upload a power cut interrupted (gc runs under the endpoint's
		// lock: none is being received).
		up, n, err := p.dropUploads()
		res.Removed, res.Bytes = append(res.Removed, up...), res.Bytes+n
		return err
	})
	// The clean copies on the state filesystem: those of the kept
	// programs' texts stay.
	needed := map[string]bool{}
	for _, t := range texts {
		needed[t] = true
	}
	gone, n, cerr := p.gcCleanCopies(needed)
	res.Removed, res.Bytes = append(res.Removed, gone...), res.Bytes+n
	return res, errors.Join(err, cerr)
}

// programs returns the paths of the deployed programs, those a service's
// link names and those none does; an error while a trial is open.
func (p *Programs) programs() (linked, unlinked []string, err error) {
	used, err := p.linked()
	if err != nil {
		return nil, nil, err
	}
	des, err := os.ReadDir(p.programsDir())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	for _, de := range des {
		path := filepath.Join(p.programsDir(), de.Name())
		if used[de.Name()] {
			linked = append(linked, path)
		} else {
			unlinked = append(unlinked, path)
		}
	}
	return linked, unlinked, nil
}

// removePrograms removes paths from programs/, adding each to removed,
// then syncs the directory. Only with the store writable.
func (p *Programs) removePrograms(paths []string, removed *[]string) error {
	for _, path := range paths {
		if err := os.Remove(path); err != nil {
			return err
		}
		*removed = append(*removed, path)
	}
	if len(paths) == 0 {
		return nil
	}
	return dirsync.Sync(p.programsDir())
}

// countFreed starts counting what the store's filesystem gets back
// (freeBytes); the function it returns sets *n to that.
func (p *Programs) countFreed(n *int64) (func(), error) {
	before, err := freeBytes(p.dir())
	if err != nil {
		return nil, err
	}
	return func() {
		if after, err := freeBytes(p.dir()); err == nil {
			*n = max(after-before, 0)
		}
	}, nil
}

// linked returns the base names of the programs the services' links
// name; an error while a trial is open.
func (p *Programs) linked() (map[string]bool, error) {
	des, err := os.ReadDir(p.servicesDir())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	used := map[string]bool{}
	for _, de := range des {
		if strings.HasSuffix(de.Name(), contract.TrialSuffix) {
			return nil, fmt.Errorf("service %s is on trial (a deploy is running): gc later", strings.TrimSuffix(de.Name(), contract.TrialSuffix))
		}
		if t, err := os.Readlink(filepath.Join(p.servicesDir(), de.Name())); err == nil {
			used[filepath.Base(t)] = true
		}
	}
	return used, nil
}

// freeBytes is the free space of the filesystem holding dir. gc counts
// what it freed as the growth of this, not as the removed files' lengths:
// the store allocates in 2 MiB clusters (bigalloc, so text lands
// 2 MiB-aligned on pmem), and a 4 KiB header file frees a whole cluster.
// The store is written by one step at a time, in its read-write window,
// so nothing else moves the figure meanwhile; a file still open elsewhere
// is not freed, and is rightly not counted.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("the text store's free space: %w", err)
	}
	return int64(st.Bfree) * st.Bsize, nil
}
