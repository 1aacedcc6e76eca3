package sntp

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"
)

// Answer is a good answer to a query.
type Answer struct {
	Server  string        // the address asked, HOST:PORT
	Addr    string        // the address that answered
	Stratum uint8         // the server's
	Offset  time.Duration // what to add to the local clock
	Delay   time.Duration // the round trip, less the server's time
	Time    time.Time     // the server's time when the answer arrived
}

// Query asks server (HOST:PORT) once and returns its answer, or an error
// naming the server and why its answer was refused. It waits until ctx
// ends for an answer; read answers that are not one (another address, a
// bad packet) are refused as they come and the wait goes on, so a stray
// packet cannot end a query.
func Query(ctx context.Context, server string) (Answer, error) {
	raddr, err := resolve(ctx, server)
	if err != nil {
		return Answer{}, fmt.Errorf("NTP server %s: %w", server, err)
	}
	c, err := net.ListenUDP("udp", nil)
	if err != nil {
		return Answer{}, fmt.Errorf("NTP server %s: %w", server, err)
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	var nb [8]byte
	rand.Read(nb[:])
	nonce := binary.BigEndian.Uint64(nb[:])
	req := Packet{Version: 4, Mode: ModeClient, Transmit: nonce}
	t1 := time.Now()
	if _, err := c.WriteToUDP(req.Marshal(), raddr); err != nil {
		return Answer{}, fmt.Errorf("NTP server %s: %w", server, err)
	}
	buf := make([]byte, 1024)
	var refused error
	for {
		n, from, err := c.ReadFromUDP(buf)
		t4 := time.Now()
		if err != nil {
			if refused != nil {
				return Answer{}, refused
			}
			if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
				err = errors.New("no answer in time")
			}
			return Answer{}, fmt.Errorf("NTP server %s (%s): %w", server, raddr, err)
		}
		if !from.IP.Equal(raddr.IP) || from.Port != raddr.Port {
			continue // not the server's: ignored, as anyone may send
		}
		p, err := Parse(buf[:n])
		if err == nil {
			err = p.CheckAnswer(nonce)
		}
		if err != nil {
			refused = fmt.Errorf("NTP server %s (%s): answer refused: %w", server, from, err)
			if p.Stratum == 0 && p.Mode == ModeServer && p.Origin == nonce {
				return Answer{}, refused // the server itself said no: a kiss-o'-death
			}
			continue
		}
		return answer(server, from.String(), p, t1, t4), nil
	}
}

// answer computes RFC 4330's offset and delay: T1 and T4 the client's send
// and receive times, T2 and T3 the server's receive and transmit times.
func answer(server, addr string, p Packet, t1, t4 time.Time) Answer {
	t2, t3 := Time(p.Receive), Time(p.Transmit)
	// Wall readings for the offset (the clock being corrected), the
	// monotonic one for the round trip.
	w1, w4 := t1.Round(0), t4.Round(0)
	offset := (t2.Sub(w1) + t3.Sub(w4)) / 2
	delay := max(t4.Sub(t1)-t3.Sub(t2), 0)
	return Answer{Server: server, Addr: addr, Stratum: p.Stratum, Offset: offset, Delay: delay, Time: t4.Round(0).Add(offset)}
}

// resolve is server's first address, looked up within ctx (a shutdown
// must not wait out a resolver's timeouts).
func resolve(ctx context.Context, server string) (*net.UDPAddr, error) {
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		return nil, err
	}
	p, err := net.DefaultResolver.LookupPort(ctx, "udp", port)
	if err != nil {
		return nil, err
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("no address for %s", host)
	}
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(ips[0].Unmap(), uint16(p))), nil
}
