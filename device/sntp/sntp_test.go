package sntp

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// startServer runs a real SNTP server on the loopback: reply turns each
// request into the answer sent back (nil: none).
func startServer(t *testing.T, reply func(req Packet) []byte) string {
	t.Helper()
	return startServerFrom(t, func(req Packet, _ *net.UDPAddr) []byte { return reply(req) })
}

func startServerFrom(t *testing.T, reply func(req Packet, from *net.UDPAddr) []byte) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			req, err := Parse(buf[:n])
			if err != nil {
				continue
			}
			if b := reply(req, from); b != nil {
				c.WriteToUDP(b, from)
			}
		}
	}()
	return c.LocalAddr().String()
}

// goodAnswer answers as a stratum-2 server whose clock is skew ahead.
func goodAnswer(skew time.Duration) func(Packet) []byte {
	return func(req Packet) []byte {
		now := time.Now().Add(skew)
		return Packet{Version: 4, Mode: ModeServer, Stratum: 2, Origin: req.Transmit,
			Receive: Timestamp(now), Transmit: Timestamp(now)}.Marshal()
	}
}

func TestQuery(t *testing.T) {
	skew := 40 * 365 * 24 * time.Hour // as a board at 1986 sees a server
	addr := startServer(t, goodAnswer(skew))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, err := Query(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if d := a.Offset - skew; d < -time.Second || d > time.Second {
		t.Errorf("offset %v, want about %v", a.Offset, skew)
	}
	if a.Stratum != 2 || a.Delay < 0 {
		t.Errorf("answer %+v", a)
	}
}

func TestQueryRefuses(t *testing.T) {
	mod := func(f func(req Packet, p *Packet)) func(Packet) []byte {
		return func(req Packet) []byte {
			now := time.Now()
			p := Packet{Version: 4, Mode: ModeServer, Stratum: 2, Origin: req.Transmit, Receive: Timestamp(now), Transmit: Timestamp(now)}
			f(req, &p)
			return p.Marshal()
		}
	}
	for _, c := range []struct {
		name  string
		reply func(Packet) []byte
		want  string
	}{
		{"mode", mod(func(_ Packet, p *Packet) { p.Mode = ModeClient }), "mode 3, want 4"},
		{"version", mod(func(_ Packet, p *Packet) { p.Version = 2 }), "version 2, want 3 or 4"},
		{"kiss", mod(func(_ Packet, p *Packet) { p.Stratum = 0; p.RefID = [4]byte{'R', 'A', 'T', 'E'} }), `kiss-o'-death "RATE"`},
		{"stratum", mod(func(_ Packet, p *Packet) { p.Stratum = 16 }), "stratum 16"},
		{"leap", mod(func(_ Packet, p *Packet) { p.Leap = 3 }), "leap indicator 3"},
		{"transmit", mod(func(_ Packet, p *Packet) { p.Transmit = 0 }), "transmit timestamp 0"},
		{"origin", mod(func(req Packet, p *Packet) { p.Origin = req.Transmit + 1 }), "origin timestamp"},
		{"short", func(Packet) []byte { return make([]byte, 47) }, "NTP packet of 47 bytes"},
		{"silent", func(Packet) []byte { return nil }, "no answer in time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := startServer(t, c.reply)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := Query(ctx, addr)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), addr) {
				t.Fatalf("error %v, want one naming %s and %q", err, addr, c.want)
			}
		})
	}
}

// A packet from another address is ignored, and the server's answer after
// it is taken.
func TestQueryIgnoresStrangers(t *testing.T) {
	stranger, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	good := goodAnswer(time.Hour)
	addr := startServerFrom(t, func(req Packet, from *net.UDPAddr) []byte {
		// A forged answer, from another port, first.
		stranger.WriteToUDP(Packet{Version: 4, Mode: ModeServer, Stratum: 1, Origin: req.Transmit, Transmit: 1 << 63}.Marshal(), from)
		time.Sleep(20 * time.Millisecond)
		return good(req)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, err := Query(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if a.Offset < 59*time.Minute {
		t.Errorf("offset %v: the stranger's answer was taken", a.Offset)
	}
}

func TestKeeperStepsThenSlews(t *testing.T) {
	var mu sync.Mutex
	skew := 2 * time.Hour
	addr := startServer(t, func(req Packet) []byte {
		mu.Lock()
		defer mu.Unlock()
		return goodAnswer(skew)(req)
	})
	dead := startServer(t, func(Packet) []byte { return nil })
	type event struct {
		stepped bool
		offset  time.Duration
	}
	events := make(chan event, 10)
	var logs bytes.Buffer
	var logMu sync.Mutex
	k := &Keeper{Servers: []string{dead, addr}, Interval: 10 * time.Millisecond, Timeout: 100 * time.Millisecond,
		Step: func(time.Time) error { return nil }, Slew: func(time.Duration) error { return nil },
		Logf: func(f string, a ...any) {
			logMu.Lock()
			defer logMu.Unlock()
			logs.WriteString(strings.TrimSpace(strings.ReplaceAll(f, "%", "")) + "\n")
		},
		Set: func(a Answer, stepped bool) {
			mu.Lock()
			skew = 10 * time.Millisecond // the step took: what is left is small
			mu.Unlock()
			events <- event{stepped, a.Offset}
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { k.Run(ctx); close(done) }()
	first, second := <-events, <-events
	cancel()
	<-done
	if !first.stepped || first.offset < time.Hour {
		t.Errorf("first answer %+v: want a step by about 2h", first)
	}
	if second.stepped || second.offset > StepLimit {
		t.Errorf("second answer %+v: want a slew", second)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logs.String(), "stepped by") {
		t.Errorf("no step logged:\n%s", logs.String())
	}
}

func TestTimestamp(t *testing.T) {
	for _, s := range []string{"1970-01-01T00:00:00Z", "2026-11-29T10:00:00.5Z", "2036-02-07T06:28:16Z", "2040-01-01T00:00:00Z"} {
		tm, _ := time.Parse(time.RFC3339Nano, s)
		if got := Time(Timestamp(tm)); got.Sub(tm).Abs() > time.Microsecond {
			t.Errorf("%s: round trip %s", s, got)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Packet{Version: 4, Mode: ModeServer, Stratum: 2, Transmit: 1 << 63}.Marshal())
	f.Add(make([]byte, 47))
	f.Add(append(make([]byte, PacketSize), 1, 2, 3))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			if len(b) >= PacketSize {
				t.Fatalf("%d bytes refused: %v", len(b), err)
			}
			return
		}
		if !bytes.Equal(p.Marshal(), b[:PacketSize]) {
			t.Fatalf("Marshal(Parse(b)) differs from b")
		}
		p.CheckAnswer(p.Origin)
		_ = Time(p.Transmit)
	})
}
