package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/omf"
)

// server serves the files under one directory through omf.
type server struct {
	root *os.Root

	mu    sync.Mutex
	files map[string]*entry
}

// entry is an open file and the identity it was opened with; users counts
// the requests reading it, so a replaced file is closed only after them.
type entry struct {
	f        *omf.File
	ino      uint64
	size     int64
	mod      time.Time
	users    int
	replaced bool
}

func newServer(dir string) (*server, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("-root: %w", err)
	}
	return &server{root: r, files: map[string]*entry{}}, nil
}

// Close closes every file no request is reading, and the root.
func (s *server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, e := range s.files {
		if e.users == 0 {
			e.f.Close()
		}
		delete(s.files, name)
	}
	return s.root.Close()
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "only GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, "/")
	if name == "" {
		name = "index.html"
	}
	if !fs.ValidPath(name) {
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	e, err := s.get(name)
	if err != nil {
		if errors.Is(err, errNotServable) {
			http.NotFound(w, r)
			return
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer s.put(name, e)
	// ServeContent reads through ReadAt: the bytes are copied once, from
	// the mapping into the response, with no read(2). A file truncated
	// meanwhile fails the read with omf.ErrTruncated; the status line may
	// already be out, so the connection is cut short, never the process.
	http.ServeContent(w, r, name, e.mod, io.NewSectionReader(e.f, 0, e.size))
}

// errNotServable: the name is no regular file inside -root (missing, a
// directory, a link out of it): a 404.
var errNotServable = errors.New("not a regular file under the root")

// get returns the entry for name, opening the file if it is new or was
// replaced (another inode, size or time) since it was opened.
func (s *server) get(name string) (*entry, error) {
	st, err := s.root.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNotServable, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", name, errNotServable)
	}
	ino := inode(st)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.files[name]; e != nil {
		if e.ino == ino && e.size == st.Size() && e.mod.Equal(st.ModTime()) {
			e.users++
			return e, nil
		}
		e.replaced = true
		delete(s.files, name)
		if e.users == 0 {
			e.f.Close()
		}
	}
	h, err := s.root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNotServable, err)
	}
	f, err := omf.NewFile(h, omf.Options{})
	if err != nil {
		h.Close()
		return nil, err
	}
	// The identity of what was opened, which a rename may have changed
	// since the Stat above.
	if st, err = h.Stat(); err != nil {
		f.Close()
		return nil, err
	}
	e := &entry{f: f, ino: inode(st), size: st.Size(), mod: st.ModTime(), users: 1}
	s.files[name] = e
	return e, nil
}

// put ends a request's use of e.
func (s *server) put(name string, e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.users--
	if e.replaced && e.users == 0 {
		e.f.Close()
	}
}

func inode(st fs.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Ino
	}
	return 0
}
