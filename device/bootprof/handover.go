package bootprof

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/format/bootmark"
	"github.com/nvboot/nvboot/internal/cpucounter"
)

// handoverText is the kernel's record of running init. Only a record
// naming init (nvinit's argv[0], which the kernel sets to the path it ran)
// counts: in a container, the kernel log holds the host's own boot.
func handoverText(init string) string { return "Run " + init + " as init process" }

// findRecords reads kernel log records, as /dev/kmsg gives them or as
// syslog(2) prints them (recordOf), and returns the time of the first
// record whose text is texts[i], keyed by i.
func findRecords(r io.Reader, texts ...string) map[int]time.Duration {
	found := map[int]time.Duration{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 8192), 1<<20)
	for sc.Scan() {
		at, text, ok := recordOf(sc.Text())
		if !ok {
			continue
		}
		i := slices.Index(texts, text)
		if i < 0 {
			continue
		}
		if _, seen := found[i]; !seen {
			found[i] = at
		}
	}
	return found
}

// recordOf reads one line of the kernel log: a /dev/kmsg record
// ("prio,seq,usec,flags;text") or a line of syslog(2)'s
// ("<prio>[secs.usecs] text").
func recordOf(line string) (at time.Duration, text string, ok bool) {
	if rest, found := strings.CutPrefix(line, "<"); found {
		_, rest, found = strings.Cut(rest, ">[")
		stamp, text, found2 := strings.Cut(rest, "] ")
		secs, usecs, found3 := strings.Cut(strings.TrimSpace(stamp), ".")
		s, err1 := strconv.ParseInt(secs, 10, 64)
		us, err2 := strconv.ParseInt(usecs, 10, 64)
		if !found || !found2 || !found3 || len(usecs) != 6 || err1 != nil || err2 != nil || s < 0 || us < 0 || s > 1<<32 {
			return 0, "", false
		}
		return time.Duration(s)*time.Second + time.Duration(us)*time.Microsecond, text, true
	}
	head, text, found := strings.Cut(line, ";")
	if !found {
		return 0, "", false
	}
	f := strings.Split(head, ",")
	if len(f) < 3 {
		return 0, "", false
	}
	us, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || us < 0 {
		return 0, "", false
	}
	return time.Duration(us) * time.Microsecond, text, true
}

// findRecord is the time of the first kernel log record whose text is
// text: looked for in the log's last recentLogSize bytes, one system call
// (the records nvinit wants are the newest: the kernel's last before it
// ran init, and nvinit's own), else in the whole log through /dev/kmsg,
// a system call per record, several ms of a 1-GIPS boot.
func findRecord(text string) (time.Duration, bool) {
	if d, ok := findRecords(recentLog(recentLogSize), text)[0]; ok {
		return d, true
	}
	d, ok := findRecords(kmsg(), text)[0]
	return d, ok
}

// recentLogSize is how much of the log's end recentLog reads: the
// handover record is followed by a few lines of init's arguments and
// environment, and by what the kernel logs while nvinit starts.
const recentLogSize = 4 << 10

// syslogActionReadAll is syslog(2)'s SYSLOG_ACTION_READ_ALL: the last
// bytes of the log, as many as fit, left in it.
const syslogActionReadAll = 3

// recentLog is the end of the kernel log as syslog(2) prints it, at most
// size bytes; empty when it cannot be read (no CAP_SYSLOG, no printk
// timestamps: then no line has a time, and /dev/kmsg is read instead).
func recentLog(size int) io.Reader {
	buf := make([]byte, size)
	n, err := syscall.Klogctl(syslogActionReadAll, buf)
	if err != nil || n <= 0 {
		return strings.NewReader("")
	}
	return bytes.NewReader(buf[:n])
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
	d, ok := findRecord(handoverText(os.Args[0]))
	if !ok {
		return
	}
	m.at(bootmark.Handover, "", d)
	if !cpucounter.Available {
		return
	}
	m.tsc()
	// Opened at the log's end before the record is written, the log's
	// reader then reads the new record alone.
	r, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	newer := &kmsgReader{fd: r, close: true}
	if _, err := syscall.Seek(r, 0, io.SeekEnd); err != nil {
		syscall.Close(r)
		newer = nil
	}
	w, err := syscall.Open("/dev/kmsg", syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		if newer != nil {
			syscall.Close(r)
		}
		return
	}
	tsc := strconv.FormatUint(cpucounter.Read(), 10)
	text := "nvinit: tsc " + tsc
	syscall.Write(w, []byte("<6>"+text+"\n")) // <6>: info, kept off a quiet console
	syscall.Close(w)
	ok = false
	if newer != nil {
		d, ok = findRecords(newer, text)[0]
	}
	if !ok {
		d, ok = findRecord(text)
	}
	if ok {
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
	rec   []byte // one record's read, reused
	buf   []byte // what of it Read has not returned
	close bool   // close fd at the end of the log
}

func (k *kmsgReader) Read(p []byte) (int, error) {
	for len(k.buf) == 0 {
		if k.fd < 0 {
			return 0, io.EOF
		}
		if k.rec == nil {
			k.rec = make([]byte, 8192)
		}
		n, err := syscall.Read(k.fd, k.rec)
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
		k.buf = k.rec[:n]
	}
	n := copy(p, k.buf)
	k.buf = k.buf[n:]
	return n, nil
}
