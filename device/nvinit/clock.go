package nvinit

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/format/bootmark"
)

// markTSC prints the tsc mark: the time-stamp counter and the uptime read
// together. Under QEMU's -icount the TSC is the guest's virtual clock in
// nanoseconds since power-on, so the host can place every other mark (all
// stamped with the uptime) on a clock that starts at power-on, firmware and
// kernel loading included, without trusting when lines reached it.
func markTSC(c *Console) {
	if !haveTSC {
		return
	}
	up := Uptime
	if c.Uptime != nil {
		up = c.Uptime
	}
	// Uptime first: the TSC read right after it is at most a few hundred
	// instructions later, well under the mark's microsecond resolution.
	u := up()
	c.Line(bootmark.Format(bootmark.Mark{Name: bootmark.TSC, Arg: strconv.FormatUint(readTSC(), 10), Uptime: u}))
}

// AnswerParam is the kernel command-line parameter that asks nvinit to time
// the first HTTP answer of a service from inside the guest, as
// nvboot.answer=PORT. `nvboot measure` sets it under the device clock, where
// a request timed by the host would measure the emulator, not the device.
const AnswerParam = "nvboot.answer"

// AnswerPort returns the port nvboot.answer asks for in a kernel command
// line, 0 when there is none; a malformed value is an error naming it.
func AnswerPort(cmdline string) (int, error) {
	for _, f := range strings.Fields(cmdline) {
		v, ok := strings.CutPrefix(f, AnswerParam+"=")
		if !ok {
			continue
		}
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			return 0, fmt.Errorf("%s=%q: want a TCP port, 1 to 65535", AnswerParam, v)
		}
		return p, nil
	}
	return 0, nil
}

// markFirstAnswer polls http://127.0.0.1:PORT/ every poll until it answers
// with any status below 500, then prints the answered mark. It gives up
// with ctx. Over loopback: the host's own request through the emulated
// network would put the emulator's timing into a guest-clock figure.
func markFirstAnswer(ctx context.Context, c *Console, port int, poll time.Duration) {
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
				c.Mark(bootmark.Answered, strconv.Itoa(port))
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

// startAnswerProbe starts markFirstAnswer when the kernel command line asks.
func startAnswerProbe(ctx context.Context, c *Console, cmdline string) {
	port, err := AnswerPort(cmdline)
	if err != nil {
		c.Logf("%v", err)
		return
	}
	if port != 0 {
		go markFirstAnswer(ctx, c, port, time.Millisecond)
	}
}
