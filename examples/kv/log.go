package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
)

// logStore is the key-value state of -state mode: a map in memory, made
// durable by an append-only log file that is replayed at start. Each record:
//
//	u32 length of the rest, u32 CRC32-C of the rest, u8 op (1 put, 2 delete),
//	u32 key length, key, value
//
// A put is acknowledged only after its record is fsync'ed. A torn record at
// the end (a power cut mid-append) is cut off at open; corruption before the
// end is an error, never silently dropped data.
//
// The default state is the persistent heap (heapStore); this mode stays for
// comparison and for hosts where a log file is preferred.
type logStore struct {
	mu   sync.RWMutex
	m    map[string][]byte
	f    *os.File
	path string
	size int64
}

const (
	opPut = 1
	opDel = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func openLogStore(path string) (*logStore, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the state file: %w", err)
	}
	s := &logStore{m: map[string][]byte{}, f: f, path: path}
	good, err := s.replay()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	if err := f.Truncate(good); err != nil { // drop a torn tail
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	s.size = good
	return s, nil
}

// replay applies every whole record and returns the offset after the last
// one. Only the last record may be damaged (torn by a power cut mid-append).
func (s *logStore) replay() (int64, error) {
	st, err := s.f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	r := bufio.NewReader(io.NewSectionReader(s.f, 0, size))
	var off int64
	for off < size {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return off, nil // a torn header at the end
		}
		n := int64(binary.LittleEndian.Uint32(hdr[:4]))
		last := off+8+n >= size
		if off+8+n > size {
			return off, nil // a torn body at the end
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return 0, err
		}
		ok := n >= 5 && crc32.Checksum(body, castagnoli) == binary.LittleEndian.Uint32(hdr[4:])
		if !ok && last {
			return off, nil // the last record, half written
		}
		if !ok {
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

func (s *logStore) append(op byte, key string, val []byte) error {
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

func (s *logStore) Keys(prefix string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var k []string
	for key := range s.m {
		if strings.HasPrefix(key, prefix) {
			k = append(k, key)
		}
	}
	sort.Strings(k)
	return k
}

func (s *logStore) Stats() map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return map[string]any{"keys": len(s.m), "log_bytes": s.size, "state": s.path, "mode": "log+fsync"}
}

func (s *logStore) Close() error { return s.f.Close() }
