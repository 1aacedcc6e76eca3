package pool

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// Conn sends and receives messages with their files over a SOCK_SEQPACKET
// unix socket.
type Conn struct{ *net.UnixConn }

// Send writes m with files attached (m.NFiles is set from files). Every file
// is put into blocking mode first, as os/exec does for a child's files.
func (c Conn) Send(m *Msg, files []*os.File) error {
	m.NFiles = len(files)
	b, err := m.Encode()
	if err != nil {
		return err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = syscall.UnixRights(fds...)
	}
	if _, _, err := c.WriteMsgUnix(b, oob, nil); err != nil {
		return fmt.Errorf("sending %v: %w", m.Type, err)
	}
	return nil
}

// Recv reads one message and the files it carries; io.EOF when the peer
// closed. The caller owns the files.
func (c Conn) Recv() (*Msg, []*os.File, error) {
	bp := recvBufs.Get().(*[]byte)
	defer recvBufs.Put(bp)
	b := *bp
	oob := make([]byte, syscall.CmsgSpace(4*MaxFiles))
	n, oobn, flags, _, err := c.ReadMsgUnix(b, oob)
	if err != nil {
		return nil, nil, fmt.Errorf("receiving: %w", err)
	}
	files, ferr := parseRights(oob[:oobn])
	if n == 0 && oobn == 0 {
		return nil, nil, io.EOF
	}
	m, err := checkRecv(b[:n], flags, files)
	if err == nil {
		err = ferr
	}
	if err != nil {
		closeAll(files)
		return nil, nil, err
	}
	return m, files, nil
}

// recvBufs holds MaxMsg-byte receive buffers: Decode copies what it keeps.
var recvBufs = sync.Pool{New: func() any { b := make([]byte, MaxMsg); return &b }}

// checkRecv decodes a received datagram and checks it carried what it says.
func checkRecv(b []byte, flags int, files []*os.File) (*Msg, error) {
	if flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0 {
		return nil, fmt.Errorf("receiving: %w: message or its files truncated", ErrBadMessage)
	}
	m, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("receiving: %w", err)
	}
	if m.NFiles != len(files) {
		return nil, fmt.Errorf("receiving %v: %w: says %d files, carries %d", m.Type, ErrBadMessage, m.NFiles, len(files))
	}
	return m, nil
}

// parseRights turns SCM_RIGHTS control messages into close-on-exec files.
func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	scms, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("receiving files: %w", err)
	}
	var files []*os.File
	var errs []error
	for i := range scms {
		fds, err := syscall.ParseUnixRights(&scms[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, fd := range fds {
			syscall.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), fmt.Sprintf("fd%d", fd)))
		}
	}
	return files, errors.Join(errs...)
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// Socketpair returns two connected SOCK_SEQPACKET sockets as files.
func Socketpair() (a, b *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "pool-a"), os.NewFile(uintptr(fds[1]), "pool-b"), nil
}

// FileConn makes a Conn of a socket file; f may be closed afterwards.
func FileConn(f *os.File) (Conn, error) {
	nc, err := net.FileConn(f)
	if err != nil {
		return Conn{}, fmt.Errorf("socket %s: %w", f.Name(), err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return Conn{}, fmt.Errorf("socket %s: not a unix socket", f.Name())
	}
	return Conn{uc}, nil
}
