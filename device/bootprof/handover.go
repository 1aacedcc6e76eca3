package bootprof

import (
	"bufio"
	"errors"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/format/bootmark"
)

// findHandover reads kmsg records ("prio,seq,usec,flags;text") and returns
// the time of the kernel's "Run <init> as init process" record. Only a
// record naming init (nvinit's argv[0], which the kernel sets to the path
// it ran) counts: in a container, /dev/kmsg holds the host's own boot.
func findHandover(r io.Reader, init string) (time.Duration, bool) {
	t := findRecords(r, "Run "+init+" as init process")
	d, ok := t[0]
	return d, ok
}

// findRecords reads kmsg records and returns the time of the first record
// whose text is texts[i], keyed by i.
func findRecords(r io.Reader, texts ...string) map[int]time.Duration {
	found := map[int]time.Duration{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 8192), 1<<20)
	for sc.Scan() {
		head, text, ok := strings.Cut(sc.Text(), ";")
		if !ok {
			continue
		}
		i := slices.Index(texts, text)
		if i < 0 {
			continue
		}
		if _, seen := found[i]; seen {
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
		found[i] = time.Duration(us) * time.Microsecond
	}
	return found
}

// Handover prints the handover mark, the moment the kernel ran init: the
// kernel logs it ("Run /sbin/nvinit as init process") even under `quiet`,
// stamped with its own clock, and Handover finds the record in /dev/kmsg,
// so `nvboot measure` can split kernel time from init-to-service time.
// Then the tsc mark, and the kmsg-tsc mark: the TSC written into a kernel
// log record and printed with that record's time, which ties the kernel's
// log clock (the handover mark's, whose zero is the kernel's clock start)
// to the TSC, and so, under the device clock, to power-on. Nothing is
// printed when the kernel's record of running us is not there (the ring
// buffer overflowed, no /dev, or a container, whose /dev/kmsg is the
// host's: nothing is written into it).
func (m Marker) Handover() {
	d, ok := findHandover(kmsg(), os.Args[0])
	if !ok {
		return
	}
	m.at(bootmark.Handover, "", d)
	if !haveTSC {
		return
	}
	m.tsc()
	w, err := syscall.Open("/dev/kmsg", syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	tsc := strconv.FormatUint(readTSC(), 10)
	text := "nvinit: tsc " + tsc
	syscall.Write(w, []byte("<6>"+text+"\n")) // <6>: info, kept off a quiet console
	syscall.Close(w)
	if d, ok := findRecords(kmsg(), text)[0]; ok {
		m.at(bootmark.KmsgTSC, tsc, d)
	}
}

// kmsg reads the kernel log from its start; an empty log when it cannot be
// opened.
func kmsg() io.Reader {
	// Raw syscalls: an *os.File opened O_NONBLOCK would park in Go's poller
	// at the end of the log instead of returning EAGAIN.
	fd, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return strings.NewReader("")
	}
	return &kmsgReader{fd: fd, close: true}
}

// kmsgReader turns /dev/kmsg (one record per read, EAGAIN at the end) into a
// stream of lines.
type kmsgReader struct {
	fd    int
	buf   []byte
	close bool // close fd at the end of the log
}

func (k *kmsgReader) Read(p []byte) (int, error) {
	for len(k.buf) == 0 {
		if k.fd < 0 {
			return 0, io.EOF
		}
		rec := make([]byte, 8192)
		n, err := syscall.Read(k.fd, rec)
		if errors.Is(err, syscall.EPIPE) {
			continue // a record was overwritten while we read: go on with the next
		}
		if err != nil || n <= 0 {
			if k.close {
				syscall.Close(k.fd)
				k.fd = -1
			}
			if err != nil && !errors.Is(err, syscall.EAGAIN) {
				return 0, err
			}
			return 0, io.EOF
		}
		k.buf = rec[:n]
	}
	n := copy(p, k.buf)
	k.buf = k.buf[n:]
	return n, nil
}
