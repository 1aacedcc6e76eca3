package pool

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Message layout, version 1. Every message is one SOCK_SEQPACKET datagram,
// little-endian, with the files it carries attached as SCM_RIGHTS:
//
//	off  size  field
//	  0     4  magic    "NVPL"
//	  4     2  version  1
//	  6     2  type     a Type below
//	  8     4  length   bytes of payload after this header (≤ MaxPayload)
//	 12     4  nfiles   files attached by SCM_RIGHTS (≤ MaxFiles)
//	 16     …  payload: every field below, in this order, in every message
//	           (fields a type does not use are zero):
//	             str   Name     program name (Spawn), error text (Error)
//	             strs  Argv     argument vector (Spawn, Activate)
//	             strs  Env      environment, KEY=VALUE (Spawn, Activate)
//	             str   Dir      working directory (Spawn, Activate)
//	             i64   Pid      process id (Started, Ready)
//	             i64   Status   raw wait status (Exited, Done)
//	             i64   Signal   signal number (Signal)
//	             i64   Flags    FlagHit (Started), FlagKeepConn and
//	                            FlagEndPipe (Spawn), FlagEndPipe (Activate),
//	                            FlagReported (Done)
//	             i64×5 Usage    user µs, system µs, max RSS KiB, minor and
//	                            major faults (Exited, Done)
//	             bytes Data     JSON (StatsReply)
//	           str and bytes: u32 length then the bytes; strs: u32 count then
//	           each str. Argv, Env and Dir hold no NUL byte (exec cannot carry
//	           one). Nothing may follow the last field.
const (
	HeaderSize = 16
	Version    = 1
	// MaxPayload bounds a message so it fits one datagram under the default
	// socket buffer (net.core.wmem_default is 208 KiB).
	MaxPayload = 128 << 10
	// MaxFiles bounds the files one message carries.
	MaxFiles = 64
	// MaxMsg is the size of a receive buffer that holds any message.
	MaxMsg = HeaderSize + MaxPayload
)

// Magic starts every message.
var Magic = [4]byte{'N', 'V', 'P', 'L'}

// Type says what a message is.
type Type uint16

// Message types. Client → poold: Spawn, Signal, Stats, Reduce. poold →
// client: Started, Exited, Error, StatsReply, OK. poold → parked process:
// Activate; parked process → poold: Ready, and Done when an activation of a
// reusable process ended (its main returned) and it parked again (reuse.go).
const (
	TypeSpawn Type = 1 + iota
	TypeStarted
	TypeExited
	TypeError
	TypeSignal
	TypeActivate
	TypeReady
	TypeStats
	TypeStatsReply
	TypeReduce
	TypeOK
	TypeDone
	typeEnd
)

var typeNames = [...]string{"", "spawn", "started", "exited", "error", "signal",
	"activate", "ready", "stats", "stats-reply", "reduce", "ok", "done"}

func (t Type) String() string {
	if t > 0 && t < typeEnd {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint16(t))
}

// Flags.
const (
	// FlagHit in Started: the spawn was served by a parked process.
	FlagHit = 1
	// FlagKeepConn in Spawn: the client keeps the connection after the
	// Exited, for its next request (one spawn at a time); without it poold
	// closes the connection once it sent the Exited.
	FlagKeepConn = 2
	// FlagEndPipe in Spawn and Activate: the last file attached is not the
	// process's but the write end of the client's end pipe. A process that
	// reports its main's return (pool.Reusable, MaxUses ≥ 1) writes its
	// end record there (EndRecordSize bytes: status, then Usage, each an
	// i64) straight to the client, then sends Done with FlagReported, and
	// poold sends no Exited for it. Otherwise the pipe closes unwritten
	// and the Exited comes from poold as usual.
	FlagEndPipe = 4
	// FlagReported in Done: the end record went to the client's end pipe.
	FlagReported = 8
)

// EndRecordSize is the size of an end record (see FlagEndPipe).
const EndRecordSize = 6 * 8

// Usage is the resource use of an exited process.
type Usage struct {
	UserMicros, SystemMicros int64
	MaxRSSKiB                int64
	MinorFaults, MajorFaults int64
}

// Msg is one protocol message; NFiles is the number of files attached.
type Msg struct {
	Type   Type
	NFiles int
	Name   string
	Argv   []string
	Env    []string
	Dir    string
	Pid    int64
	Status int64
	Signal int64
	Flags  int64
	Usage  Usage
	Data   []byte
}

// Errors of Decode; the message says where.
var (
	ErrBadMagic   = errors.New("not a pool message (bad magic)")
	ErrVersion    = errors.New("unsupported pool protocol version")
	ErrBadMessage = errors.New("malformed pool message")
)

// Encode returns m as one message.
func (m *Msg) Encode() ([]byte, error) {
	if m.Type == 0 || m.Type >= typeEnd {
		return nil, fmt.Errorf("encoding %v: %w: unknown type", m.Type, ErrBadMessage)
	}
	if m.NFiles < 0 || m.NFiles > MaxFiles {
		return nil, fmt.Errorf("encoding %v: %w: %d files (at most %d)", m.Type, ErrBadMessage, m.NFiles, MaxFiles)
	}
	b := make([]byte, HeaderSize, 256)
	b = appendStr(b, m.Name)
	b = appendStrs(b, m.Argv)
	b = appendStrs(b, m.Env)
	b = appendStr(b, m.Dir)
	for _, v := range []int64{m.Pid, m.Status, m.Signal, m.Flags, m.Usage.UserMicros,
		m.Usage.SystemMicros, m.Usage.MaxRSSKiB, m.Usage.MinorFaults, m.Usage.MajorFaults} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	b = appendStr(b, string(m.Data))
	if len(b)-HeaderSize > MaxPayload {
		return nil, fmt.Errorf("encoding %v: %w: %d bytes of payload (at most %d: fewer or shorter arguments and environment)",
			m.Type, ErrBadMessage, len(b)-HeaderSize, MaxPayload)
	}
	copy(b, Magic[:])
	binary.LittleEndian.PutUint16(b[4:], Version)
	binary.LittleEndian.PutUint16(b[6:], uint16(m.Type))
	binary.LittleEndian.PutUint32(b[8:], uint32(len(b)-HeaderSize))
	binary.LittleEndian.PutUint32(b[12:], uint32(m.NFiles))
	return b, nil
}

func appendStr(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func appendStrs(b []byte, ss []string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ss)))
	for _, s := range ss {
		b = appendStr(b, s)
	}
	return b
}

// Decode parses one message; it never panics and never allocates more than
// the input justifies.
func Decode(b []byte) (*Msg, error) {
	if len(b) < HeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrBadMessage, len(b), HeaderSize)
	}
	if !bytes.Equal(b[:4], Magic[:]) {
		return nil, ErrBadMagic
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != Version {
		return nil, fmt.Errorf("%w %d (this side speaks %d)", ErrVersion, v, Version)
	}
	m := &Msg{Type: Type(binary.LittleEndian.Uint16(b[6:]))}
	if m.Type == 0 || m.Type >= typeEnd {
		return nil, fmt.Errorf("%w: unknown type %d", ErrBadMessage, uint16(m.Type))
	}
	n := binary.LittleEndian.Uint32(b[8:])
	if n > MaxPayload || int(n) != len(b)-HeaderSize {
		return nil, fmt.Errorf("%w: %v: length field %d, %d bytes follow the header", ErrBadMessage, m.Type, n, len(b)-HeaderSize)
	}
	nf := binary.LittleEndian.Uint32(b[12:])
	if nf > MaxFiles {
		return nil, fmt.Errorf("%w: %v: %d files (at most %d)", ErrBadMessage, m.Type, nf, MaxFiles)
	}
	m.NFiles = int(nf)
	d := decoder{b: b[HeaderSize:]}
	m.Name = d.str()
	m.Argv = d.strs()
	m.Env = d.strs()
	m.Dir = d.str()
	for _, p := range []*int64{&m.Pid, &m.Status, &m.Signal, &m.Flags, &m.Usage.UserMicros,
		&m.Usage.SystemMicros, &m.Usage.MaxRSSKiB, &m.Usage.MinorFaults, &m.Usage.MajorFaults} {
		*p = d.i64()
	}
	if data := d.str(); data != "" {
		m.Data = []byte(data)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v: %s", ErrBadMessage, m.Type, d.err)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %v: %d bytes after the last field", ErrBadMessage, m.Type, len(d.b))
	}
	if err := noNUL(m); err != nil {
		return nil, fmt.Errorf("%w: %v: %v", ErrBadMessage, m.Type, err)
	}
	return m, nil
}

func noNUL(m *Msg) error {
	for i, s := range m.Argv {
		if bytes.IndexByte([]byte(s), 0) >= 0 {
			return fmt.Errorf("argv[%d] holds a NUL byte", i)
		}
	}
	for i, s := range m.Env {
		if bytes.IndexByte([]byte(s), 0) >= 0 {
			return fmt.Errorf("env[%d] holds a NUL byte", i)
		}
	}
	if bytes.IndexByte([]byte(m.Dir), 0) >= 0 {
		return errors.New("dir holds a NUL byte")
	}
	return nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n uint64, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("%s needs %d bytes, %d left", what, n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u32(what string) uint64 {
	v := d.take(4, what)
	if v == nil {
		return 0
	}
	return uint64(binary.LittleEndian.Uint32(v))
}

func (d *decoder) i64() int64 {
	v := d.take(8, "integer field")
	if v == nil {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(v))
}

func (d *decoder) str() string {
	n := d.u32("string length")
	return string(d.take(n, "string"))
}

func (d *decoder) strs() []string {
	n := d.u32("list count")
	// Each string takes at least its 4-byte length: a count larger than the
	// rest allows is malformed, and is not allocated for.
	if d.err == nil && n > uint64(len(d.b))/4 {
		d.err = fmt.Errorf("list of %d strings in %d bytes", n, len(d.b))
	}
	if d.err != nil || n == 0 {
		return nil
	}
	ss := make([]string, 0, n)
	for range n {
		ss = append(ss, d.str())
	}
	return ss
}
