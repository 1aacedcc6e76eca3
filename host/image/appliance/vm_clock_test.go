package appliance

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/sntp"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// TestApplianceClock boots an image whose board's clock starts at 2001
// (QEMU's -rtc base=, as a board without a real-time clock starts wrong)
// and whose config names an SNTP server this test runs on the host's
// loopback (10.0.2.2 from the guest): nvinit sets the clock forward to the
// floor (contract.ClockEpoch), then SNTP steps it to the host's time while kv starts.
// After a clean power-off, a second boot at 2001 with the server silent
// starts at the time the first one saved on the state.
func TestApplianceClock(t *testing.T) {
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	buildtest.NeedTools(t)
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var answering atomic.Bool
	answering.Store(true)
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			req, err := sntp.Parse(buf[:n])
			if err != nil || !answering.Load() {
				continue
			}
			now := sntp.Timestamp(time.Now())
			srv.WriteToUDP(sntp.Packet{Version: 4, Mode: sntp.ModeServer, Stratum: 2, Origin: req.Transmit,
				Receive: now, Transmit: now}.Marshal(), from)
		}
	}()
	server := net.JoinHostPort("10.0.2.2", strconv.Itoa(srv.LocalAddr().(*net.UDPAddr).Port))

	cfg := config.Demo()
	cfg.NTP = []string{server}
	dir := filepath.Join(t.TempDir(), "out")
	im := buildLayout(t, cfg, ELF, dir, k)
	pm := t.TempDir()
	if err := CopyPmem(dir, im, pm); err != nil {
		t.Fatal(err)
	}
	boot := func() *booted {
		in, stdin := io.Pipe()
		// A forward gives the guest its network (QEMU's user network).
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		vc, err := VMConfig(dir, im, BootOptions{PmemDir: pm, Stdin: in, Forwards: []vm.Forward{{Host: port, Guest: 8080}}})
		if err != nil {
			t.Fatal(err)
		}
		vc.Extra = append(vc.Extra, "-rtc", "base=2001-01-01T00:00:00")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		t.Cleanup(cancel)
		m, err := vm.Start(ctx, vc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Kill)
		return &booted{m: m, ctx: ctx, stdin: stdin}
	}
	stepTime := func(line, marker string) time.Time {
		_, rest, _ := strings.Cut(line, marker)
		f := strings.Fields(rest)
		if len(f) == 0 {
			t.Fatalf("line %q: no time after %q", line, marker)
		}
		tm, err := time.Parse(time.RFC3339, strings.TrimSuffix(f[0], ","))
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		return tm
	}

	b := boot()
	floor := b.expect(t, "nvinit: clock: 2001-01-01T")
	if !strings.Contains(floor, "before the floor") || !stepTime(floor, "set forward to ").Equal(time.Unix(contract.ClockEpoch, 0)) {
		t.Errorf("first boot: %q, want the clock set to the floor, contract.ClockEpoch", floor)
	}
	stepped := b.expect(t, "nvinit: clock: stepped by")
	if got := stepTime(stepped, " to "); time.Until(got).Abs() > time.Minute || !strings.Contains(stepped, server) {
		t.Errorf("SNTP: %q, want a step to about %s from %s", stepped, time.Now().UTC().Format(time.RFC3339), server)
	}
	b.expect(t, "NVBOOT-MARK service-ready kv ")
	t.Logf("first boot:\n%s\n%s", floor, stepped)
	b.poweroff(t)
	saved := time.Now()

	answering.Store(false)
	b = boot()
	line := b.expect(t, "nvinit: clock: 2001-01-01T")
	if !strings.Contains(line, "saved on the state") {
		t.Fatalf("second boot: %q, want the clock set to the time saved on the state", line)
	}
	if got := stepTime(line, "set forward to "); got.After(saved.Add(time.Minute)) || saved.Sub(got) > 5*time.Minute {
		t.Errorf("second boot set to %s, want the first's power-off, about %s", got, saved.UTC().Format(time.RFC3339))
	}
	b.expect(t, "NVBOOT-MARK service-ready kv ")
	t.Logf("second boot:\n%s", line)
}
