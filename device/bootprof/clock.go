package bootprof

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/nvboot/nvboot/format/bootmark"
)

// tsc prints the tsc mark: the time-stamp counter and the uptime read
// together. Under QEMU's -icount the TSC is the guest's virtual clock in
// nanoseconds since power-on, so the host can place every other mark (all
// stamped with the uptime) on a clock that starts at power-on, firmware and
// kernel loading included, without trusting when lines reached it.
func (m Marker) tsc() {
	if !haveTSC {
		return
	}
	// Uptime first: the TSC read right after it is at most a few hundred
	// instructions later, well under the mark's microsecond resolution.
	u := m.now()
	m.at(bootmark.TSC, strconv.FormatUint(readTSC(), 10), u)
}

// FirstAnswer polls http://127.0.0.1:PORT/ every poll until it answers
// with any status below 500, then prints the answered mark. It gives up
// with ctx. Over loopback: the host's own request through the emulated
// network would put the emulator's timing into a guest-clock figure.
// contract.AnswerParam asks for it.
func (m Marker) FirstAnswer(ctx context.Context, port int, poll time.Duration) {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	t := time.NewTicker(poll)
	defer t.Stop()
	d := net.Dialer{Timeout: time.Second}
	for {
		// A bare connect first: a refused one costs far fewer instructions
		// than an HTTP request, and under the device clock every
		// instruction of the probe is time taken from the service.
		if conn, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			continue
		} else {
			conn.Close()
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 500 {
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
