package pool

import (
	"errors"
	"fmt"
	"syscall"
)

// errEOF: the peer closed the socket.
var errEOF = errors.New("peer closed the pool socket")

// sendRaw and recvRaw speak the protocol on a bare descriptor: the parked
// side runs inside init, before anything else in the program, and uses no
// poller.
func sendRaw(fd int, m *Msg) error {
	b, err := m.Encode()
	if err != nil {
		return err
	}
	if err := syscall.Sendmsg(fd, b, nil, nil, 0); err != nil {
		return fmt.Errorf("sending %v: %w", m.Type, err)
	}
	return nil
}

// rawBuf and rawOOB are the parked side's receive buffers, made and
// touched before the process parks (see warmRecv), so an activation does not
// fault in 128 KiB of fresh heap on the request path, and a reused process
// does not allocate them again per activation.
var rawBuf, rawOOB []byte

// warmRecv makes the receive buffers and faults their pages in.
func warmRecv() {
	rawBuf = make([]byte, MaxMsg)
	rawOOB = make([]byte, syscall.CmsgSpace(4*MaxFiles))
	for i := 0; i < len(rawBuf); i += 4096 {
		rawBuf[i] = 0 // make may hand out untouched zero pages: touch them
	}
}

func recvRaw(fd int) (*Msg, []int, error) {
	if rawBuf == nil {
		warmRecv()
	}
	b, oob := rawBuf, rawOOB
	var n, oobn, flags int
	var err error
	for {
		n, oobn, flags, _, err = syscall.Recvmsg(fd, b, oob, syscall.MSG_CMSG_CLOEXEC)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("receiving activation: %w", err)
	}
	if n == 0 && oobn == 0 {
		return nil, nil, errEOF
	}
	var fds []int
	if oobn > 0 {
		scms, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, nil, fmt.Errorf("receiving activation files: %w", err)
		}
		for i := range scms {
			got, err := syscall.ParseUnixRights(&scms[i])
			if err != nil {
				return nil, nil, fmt.Errorf("receiving activation files: %w", err)
			}
			fds = append(fds, got...)
		}
	}
	if flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0 {
		return nil, nil, fmt.Errorf("receiving activation: %w: truncated", ErrBadMessage)
	}
	m, err := Decode(b[:n])
	if err != nil {
		return nil, nil, fmt.Errorf("receiving activation: %w", err)
	}
	if m.NFiles != len(fds) {
		return nil, nil, fmt.Errorf("receiving activation: %w: says %d files, carries %d", ErrBadMessage, m.NFiles, len(fds))
	}
	return m, fds, nil
}
