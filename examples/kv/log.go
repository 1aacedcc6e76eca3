package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/internal/dirsync"
	"github.com/nvboot/nvboot/internal/filemode"
)

// logStore is the key-value state of -state mode: a map in memory, made
// durable by an append-only log file that is replayed at start. The file
// starts with the header logMagic, then holds records:
//
//	u32 length of the rest, u32 CRC32-C of the rest, u8 op (1 put, 2 delete),
//	u32 key length, key, value
//
// A put is acknowledged only after its record is fsync'ed. A torn record at
// the end (a power cut mid-append) is cut off at open; anything else that
// does not read as a record is an error naming the file and the offset, and
// the file is left as it is: acknowledged writes are never dropped. A file
// without the header is not a kv log and is refused untouched.
//
// The default state is the persistent heap (heapStore); this mode stays for
// comparison and for hosts where a log file is preferred.
type logStore struct {
	mu   sync.RWMutex
	m    map[string][]byte
	f    *os.File
	path string
	size int64
	// torn describes the torn record cut off at open, if any ("" if none).
	torn string
}

// logMagic starts every log file: a file without it is not kv's.
const logMagic = "nvboot kv log 1\n"

const (
	opPut = 1
	opDel = 2

	// maxBody is the largest a record's length field can be (maxKey and
	// maxValue bound it, so that a torn tail can be told from corruption).
	maxBody = 5 + maxKey + maxValue
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// openLogStore opens the log at path, or makes one (just the header) if
// there is none, and replays it.
func openLogStore(path string) (*logStore, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the state file: %w", err)
	}
	s := &logStore{m: map[string][]byte{}, f: f, path: path}
	if err := s.open(); err != nil {
		f.Close()
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	return s, nil
}

func (s *logStore) open() error {
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", filemode.Describe(st.Mode()))
	}
	if err := unix.Flock(int(s.f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return errors.New("in use by another kv (locked)")
		}
		return fmt.Errorf("flock: %w", err)
	}
	size := st.Size()
	head := make([]byte, min(size, int64(len(logMagic))))
	if _, err := s.f.ReadAt(head, 0); err != nil {
		return err
	}
	switch {
	case size < int64(len(logMagic)) && bytes.HasPrefix([]byte(logMagic), head):
		// New, or its making was cut short: nothing but (part of) the header.
		if err := s.writeHeader(); err != nil {
			return err
		}
		size = int64(len(logMagic))
	case string(head) != logMagic:
		return fmt.Errorf("not a kv log: it does not start with the header %q, so kv leaves it as it is "+
			"(a log of a kv from before the header: prepend it, printf 'nvboot kv log 1\\n' | cat - OLD > NEW)", logMagic)
	}
	good, err := s.replay(size)
	if err != nil {
		return err
	}
	if good < size { // drop a torn tail
		s.torn = fmt.Sprintf("cut off a torn record at offset %d (%d bytes, never acknowledged)", good, size-good)
		if err := s.f.Truncate(good); err != nil {
			return err
		}
		if err := s.f.Sync(); err != nil {
			return err
		}
	}
	if _, err := s.f.Seek(good, io.SeekStart); err != nil {
		return err
	}
	s.size = good
	return nil
}

// writeHeader writes the header of a new log and makes it durable, with the
// file's name.
func (s *logStore) writeHeader() error {
	if _, err := s.f.WriteAt([]byte(logMagic), 0); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return err
	}
	return dirsync.Sync(filepath.Dir(s.path))
}

// replay applies every whole record after the header and returns the offset
// after the last one. Only the last record may be incomplete (torn by a
// power cut mid-append): one whose header is cut, or whose length (no more
// than a record can have) reaches past the end of the file while no
// shorter prefix of what follows checks as a whole record. Anything else is
// corruption, reported with its offset.
func (s *logStore) replay(size int64) (int64, error) {
	off := int64(len(logMagic))
	r := bufio.NewReader(io.NewSectionReader(s.f, off, size-off))
	for off < size {
		rest := size - off
		if rest < 8 {
			return off, nil // a torn header at the end
		}
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return 0, fmt.Errorf("reading the record at offset %d: %w", off, err)
		}
		n, sum := int64(binary.LittleEndian.Uint32(hdr[:4])), binary.LittleEndian.Uint32(hdr[4:])
		if n < 5 || n > maxBody {
			return 0, fmt.Errorf("record at offset %d: length %d, want 5 to %d (corrupt, not torn)", off, n, maxBody)
		}
		if 8+n > rest {
			tail := make([]byte, rest-8)
			if _, err := io.ReadFull(r, tail); err != nil {
				return 0, fmt.Errorf("reading the record at offset %d: %w", off, err)
			}
			if k := wholePrefix(tail, sum); k > 0 {
				return 0, fmt.Errorf("record at offset %d: length %d reaches past the end of the file, but its first %d bytes check as a whole record: the length is corrupt, not torn", off, n, k)
			}
			return off, nil // a torn body at the end
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return 0, fmt.Errorf("reading the record at offset %d: %w", off, err)
		}
		if crc32.Checksum(body, castagnoli) != sum {
			return 0, fmt.Errorf("record at offset %d: checksum mismatch (corrupt, not torn)", off)
		}
		op, klen := body[0], int64(binary.LittleEndian.Uint32(body[1:5]))
		if klen > n-5 {
			return 0, fmt.Errorf("record at offset %d: key length %d beyond the record", off, klen)
		}
		key := string(body[5 : 5+klen])
		switch op {
		case opPut:
			s.m[key] = body[5+klen:]
		case opDel:
			delete(s.m, key)
		default:
			return 0, fmt.Errorf("record at offset %d: unknown op %d", off, op)
		}
		off += 8 + n
	}
	return off, nil
}

// wholePrefix returns the length of the shortest prefix of b that is a
// record body with checksum sum (a known op, a key inside it), or 0. A torn
// record's bytes are a prefix of its body: none of them checks (but by a
// 2^-32 chance per length). A record whose length field was damaged is
// followed by the records after it: its true body checks.
func wholePrefix(b []byte, sum uint32) int {
	crc := uint32(0)
	for i := range b {
		crc = crc32.Update(crc, castagnoli, b[i:i+1])
		if n := i + 1; n >= 5 && crc == sum && (b[0] == opPut || b[0] == opDel) &&
			int(binary.LittleEndian.Uint32(b[1:5])) <= n-5 {
			return n
		}
	}
	return 0
}

func (s *logStore) append(op byte, key string, val []byte) error {
	if len(key) > maxKey || len(val) > maxValue {
		return fmt.Errorf("key of %d bytes, value of %d: want at most %d and %d", len(key), len(val), maxKey, maxValue)
	}
	body := make([]byte, 5+len(key)+len(val))
	body[0] = op
	binary.LittleEndian.PutUint32(body[1:], uint32(len(key)))
	copy(body[5:], key)
	copy(body[5+len(key):], val)
	rec := make([]byte, 8, 8+len(body))
	binary.LittleEndian.PutUint32(rec, uint32(len(body)))
	binary.LittleEndian.PutUint32(rec[4:], crc32.Checksum(body, castagnoli))
	rec = append(rec, body...)
	if _, err := s.f.Write(rec); err != nil {
		// Cut back what may have been written, so the log stays whole.
		s.f.Truncate(s.size)
		s.f.Seek(s.size, io.SeekStart)
		return err
	}
	if err := s.f.Sync(); err != nil {
		return err
	}
	s.size += int64(len(rec))
	return nil
}

func (s *logStore) Put(key string, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.append(opPut, key, val); err != nil {
		return err
	}
	s.m[key] = val
	return nil
}

func (s *logStore) Delete(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[key]; !ok {
		return errNotFound
	}
	if err := s.append(opDel, key, nil); err != nil {
		return err
	}
	delete(s.m, key)
	return nil
}

func (s *logStore) Get(key string) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.m[key]
	if !ok {
		return nil, errNotFound
	}
	return v, nil
}

// Keys lists the keys with the prefix. None is damaged: they are in
// memory, read from records whose checksums the replay checked.
func (s *logStore) Keys(prefix string) ([]string, int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var k []string
	for key := range s.m {
		if strings.HasPrefix(key, prefix) {
			k = append(k, key)
		}
	}
	sort.Strings(k)
	return k, 0, nil
}

func (s *logStore) Stats() map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return map[string]any{"keys": len(s.m), "keys_damaged": 0, "log_bytes": s.size, "state": s.path, "mode": "log+fsync"}
}

func (s *logStore) Close() error { return s.f.Close() }
