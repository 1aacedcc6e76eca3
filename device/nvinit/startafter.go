package nvinit

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/device/contract"
)

// A service's start can wait for conditions (Service.StartAfter), as
// gokrazy's init waits for a package's WaitFor and WaitForClock: the clock
// set, a default route, a name that resolves. Each service waits on its own
// goroutine: the others start meanwhile, and the wait ends with Run.

// condPoll is how often a condition is checked again; gokrazy checks every
// second.
const condPoll = 100 * time.Millisecond

// startAfter starts sv at once, or once its StartAfter conditions hold.
func (s *supervisor) startAfter(sv *svc) {
	if len(sv.StartAfter) == 0 {
		s.start(sv)
		return
	}
	holds := s.Holds
	if holds == nil {
		holds = conditionHolds
	}
	poll := s.CondPoll
	if poll == 0 {
		poll = condPoll
	}
	sv.waiting = true
	s.Console.Logf("%s: waiting for %s before starting it", sv.Name, strings.Join(sv.StartAfter, ", "))
	go func() {
		t := time.NewTicker(poll)
		defer t.Stop()
		for _, cond := range sv.StartAfter {
			for !holds(cond) {
				select {
				case <-t.C:
				case <-s.ran:
					return
				}
			}
		}
		s.post(func() {
			sv.waiting = false
			if !s.stopping {
				s.start(sv)
			}
		})
	}()
}

// conditionHolds checks one condition on this machine.
func conditionHolds(cond string) bool {
	switch cond {
	case contract.StartClock:
		return clockSet(time.Now())
	case contract.StartNetRoute:
		f, err := os.Open("/proc/net/route")
		if err != nil {
			return false
		}
		defer f.Close()
		return hasDefaultRoute(f)
	case contract.StartNetOnline:
		// gokrazy's check: the name of its project resolves. nvinit sets
		// no resolver up; the image's /etc/resolv.conf names one.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, "gokrazy.org")
		return err == nil && len(addrs) > 0
	}
	return false
}

// clockSet says whether t is past 1970's first year: a board without a
// battery-backed clock boots at the epoch (gokrazy's test).
func clockSet(t time.Time) bool { return t.After(time.Unix(365*24*60*60, 0)) }

// hasDefaultRoute reads /proc/net/route: a route to 0.0.0.0/0 that is up
// and goes through a gateway.
func hasDefaultRoute(r io.Reader) bool {
	const rtfUp, rtfGateway = 0x1, 0x2
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err == nil && flags&rtfUp != 0 && flags&rtfGateway != 0 {
			return true
		}
	}
	return false
}
