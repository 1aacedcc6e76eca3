package bootprof

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/format/bootmark"
	"github.com/nvboot/nvboot/internal/cpucounter"
)

// tsc prints the tsc mark: the time-stamp counter and the uptime read
// together. Under QEMU's -icount the TSC is the guest's virtual clock in
// nanoseconds since power-on, so the host can place every other mark (all
// stamped with the uptime) on a clock that starts at power-on, firmware and
// kernel loading included, without trusting when lines reached it.
func (m Marker) tsc() {
	if !cpucounter.Available {
		return
	}
	// Uptime first: the TSC read right after it is at most a few hundred
	// instructions later, well under the mark's microsecond resolution.
	u := m.now()
	m.at(bootmark.TSC, strconv.FormatUint(cpucounter.Read(), 10), u)
}

// FirstAnswer polls 127.0.0.1:PORT every poll until it answers an HTTP
// GET / with any status below 500, then prints the answered mark. It gives
// up with ctx. Over loopback: the host's own request through the emulated
// network would put the emulator's timing into a guest-clock figure.
// contract.AnswerParam asks for it.
//
// Under the device clock every instruction of the probe is time taken from
// the service, so it is lean: a bare connect (a refused one costs few
// instructions), on the connection it made a request written by hand, and
// the answer is its status line; over net/http's client, whose first
// request cost 0.5 ms more of a 1-GIPS boot (nvboot measure -profile).
func (m Marker) FirstAnswer(ctx context.Context, port int, poll time.Duration) {
	d := BoundDialer("tcp", time.Second)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	req := []byte("GET / HTTP/1.1\r\nHost: " + addr + "\r\nConnection: close\r\n\r\n")
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if conn, err := d.DialContext(ctx, "tcp", addr); err == nil {
			code := statusOf(conn, req)
			conn.Close()
			if code >= 100 && code < 500 {
				m.Mark(bootmark.Answered, strconv.Itoa(port))
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// statusOf sends req on conn and returns the status code of the answer's
// status line ("HTTP/1.1 404 Not Found"); 0 for none within 2 s, or a
// line that is not one.
func statusOf(conn net.Conn, req []byte) int {
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write(req); err != nil {
		return 0
	}
	line, err := bufio.NewReaderSize(conn, 256).ReadString('\n')
	if err != nil {
		return 0
	}
	proto, rest, ok := strings.Cut(line, " ")
	if !ok || !strings.HasPrefix(proto, "HTTP/") || len(rest) < 3 {
		return 0
	}
	code, err := strconv.Atoi(rest[:3])
	if err != nil {
		return 0
	}
	return code
}
