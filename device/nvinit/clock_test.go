package nvinit

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/sntp"
)

func TestClockRestore(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	floor := at("2025-06-01T00:00:00Z")
	for _, c := range []struct {
		name, saved string // "": no file
		now         time.Time
		want        time.Time // zero: not set
		log         string
	}{
		{"first boot at 1970: the floor", "", time.Unix(5, 0), floor, "before the floor"},
		{"saved is later", "2026-11-01T08:00:00Z\n", time.Unix(5, 0), at("2026-11-01T08:00:00Z"), "before the time saved on the state"},
		{"saved is earlier than the floor", "2020-01-01T00:00:00Z\n", time.Unix(5, 0), floor, "floor"},
		{"clock already right", "2026-11-01T08:00:00Z\n", at("2026-11-29T10:00:00Z"), time.Time{}, ""},
		{"saved is garbage", "yesterday\n", time.Unix(5, 0), floor, `"yesterday" is not an RFC 3339 time`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			saved := filepath.Join(dir, "nvboot", "clock")
			if c.saved != "" {
				os.MkdirAll(filepath.Dir(saved), 0o755)
				os.WriteFile(saved, []byte(c.saved), 0o644)
			}
			var set time.Time
			var logs []string
			k := &wallClock{Floor: floor, Saved: saved, Now: func() time.Time { return c.now },
				Step: func(t time.Time) error { set = t; return nil },
				Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }}
			k.Restore()
			if !set.Equal(c.want) {
				t.Errorf("set to %v, want %v", set, c.want)
			}
			if !strings.Contains(strings.Join(logs, "\n"), c.log) || (c.log == "") != (len(logs) == 0) {
				t.Errorf("logged %q, want %q", logs, c.log)
			}
		})
	}
}

func TestClockSave(t *testing.T) {
	saved := filepath.Join(t.TempDir(), "nvboot", "clock")
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	k := &wallClock{Saved: saved, Now: func() time.Time { return now }, Logf: t.Logf}
	k.Save()
	got, err := readSavedClock(saved)
	if err != nil || !got.Equal(now) {
		t.Fatalf("saved %v, %v; want %v", got, err, now)
	}
}

// TestClockSNTP runs the keeper against an SNTP server on the loopback: the
// clock is stepped, the time saved, and the mark nvpull waits for written.
func TestClockSNTP(t *testing.T) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	server := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			req, err := sntp.Parse(buf[:n])
			if err != nil {
				continue
			}
			c.WriteToUDP(sntp.Packet{Version: 4, Mode: sntp.ModeServer, Stratum: 1, Origin: req.Transmit,
				Receive: sntp.Timestamp(server), Transmit: sntp.Timestamp(server)}.Marshal(), from)
		}
	}()
	dir := t.TempDir()
	stepped := make(chan time.Time, 1)
	k := &wallClock{Saved: filepath.Join(dir, "state", "clock"), SetMark: filepath.Join(dir, "run", "clock-set"),
		Step: func(t time.Time) error { stepped <- t; return nil }, Logf: t.Logf}
	k.Now = func() time.Time {
		select {
		case s := <-stepped:
			stepped <- s
			return s
		default:
			return time.Unix(5, 0)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { k.Run(ctx, []string{c.LocalAddr().String()}); close(done) }()
	deadline := time.After(10 * time.Second)
	for {
		if b, err := os.ReadFile(k.SetMark); err == nil {
			if strings.TrimSpace(string(b)) != c.LocalAddr().String() {
				t.Errorf("set mark %q", b)
			}
			break
		}
		select {
		case <-deadline:
			t.Fatal("the clock was not set")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	<-done
	if s := <-stepped; s.Sub(server).Abs() > time.Minute {
		t.Errorf("stepped to %v, want about %v", s, server)
	}
	if got, err := readSavedClock(k.Saved); err != nil || got.Sub(server).Abs() > time.Minute {
		t.Errorf("saved %v, %v; want about %v", got, err, server)
	}
}
