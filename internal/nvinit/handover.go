package nvinit

import (
	"bufio"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HandoverMark names the moment the kernel ran init. The kernel logs it
// ("Run /sbin/nvinit as init process") even under `quiet`, stamped with its
// own clock; nvinit finds the record in /dev/kmsg and prints it as a mark,
// so `nvboot measure` can split kernel time from init-to-service time.
const HandoverMark = "kernel-handover"

// FindHandover reads kmsg records ("prio,seq,usec,flags;text") and returns
// the time of the kernel's "Run <init> as init process" record. Only a
// record naming init (nvinit's argv[0], which the kernel sets to the path
// it ran) counts: in a container, /dev/kmsg holds the host's own boot.
func FindHandover(r io.Reader, init string) (time.Duration, bool) {
	want := "Run " + init + " as init process"
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 8192), 1<<20)
	for sc.Scan() {
		head, text, ok := strings.Cut(sc.Text(), ";")
		if !ok || text != want {
			continue
		}
		f := strings.Split(head, ",")
		if len(f) < 3 {
			continue
		}
		us, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || us < 0 {
			continue
		}
		return time.Duration(us) * time.Microsecond, true
	}
	return 0, false
}

// markHandover prints the handover mark from /dev/kmsg; nothing when the
// record is not there (the ring buffer overflowed, or no /dev).
func markHandover(con *Console) {
	// Raw syscalls: an *os.File opened O_NONBLOCK would park in Go's poller
	// at the end of the log instead of returning EAGAIN.
	fd, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer syscall.Close(fd)
	if d, ok := FindHandover(&kmsgReader{fd: fd}, os.Args[0]); ok {
		con.Line(FormatMark(HandoverMark, "", d))
	}
}

// kmsgReader turns /dev/kmsg (one record per read, EAGAIN at the end) into a
// stream of lines.
type kmsgReader struct {
	fd  int
	buf []byte
}

func (k *kmsgReader) Read(p []byte) (int, error) {
	for len(k.buf) == 0 {
		rec := make([]byte, 8192)
		n, err := syscall.Read(k.fd, rec)
		if errors.Is(err, syscall.EAGAIN) || (err == nil && n <= 0) {
			return 0, io.EOF
		}
		if errors.Is(err, syscall.EPIPE) {
			continue // a record was overwritten while we read: go on with the next
		}
		if err != nil {
			return 0, err
		}
		k.buf = rec[:n]
	}
	n := copy(p, k.buf)
	k.buf = k.buf[n:]
	return n, nil
}
