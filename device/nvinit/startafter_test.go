package nvinit

import (
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
)

// A service with StartAfter starts only once each condition holds; the
// others start meanwhile; with Poweroff a waiting service keeps the
// machine up.
func TestSupervisorStartAfter(t *testing.T) {
	var mu sync.Mutex
	holds := map[string]bool{}
	set := func(c string) { mu.Lock(); holds[c] = true; mu.Unlock() }
	s := &supervisor{Poweroff: true, CondPoll: time.Millisecond,
		Holds: func(c string) bool { mu.Lock(); defer mu.Unlock(); return holds[c] },
		Services: []contract.Service{
			{Name: "late", Path: "/bin/true", Restart: contract.RestartNever, StartAfter: []string{contract.StartClock, contract.StartNetRoute}},
			{Name: "now", Path: "/bin/true", Restart: contract.RestartNever},
		}}
	out, _, done := harness(t, s)
	out.expect(t, "late: waiting for clock, net-route before starting it")
	out.expect(t, "service-start now")
	set(contract.StartNetRoute) // not yet: the clock is not set
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("supervisor returned %v while late waits", err)
	default:
	}
	for len(out) > 0 {
		if l := <-out; strings.Contains(l, "service-start late") {
			t.Fatalf("late started before its clock: %q", l)
		}
	}
	set(contract.StartClock)
	out.expect(t, "service-start late")
	if err := <-done; !errors.Is(err, errAllExited) {
		t.Errorf("Run: %v", err)
	}
}

func TestConditions(t *testing.T) {
	if clockSet(time.Unix(0, 0)) || clockSet(time.Unix(3600, 0)) || !clockSet(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Error("clockSet")
	}
	const head = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	for _, tc := range []struct {
		table string
		want  bool
	}{
		{head + "eth0\t00000000\t0202000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n", true},
		{head + "eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", false}, // the link's network only
		{head + "eth0\t00000000\t00000000\t0001\t0\t0\t0\t00000000\t0\t0\t0\n", false}, // no gateway
		{head, false},
	} {
		if got := hasDefaultRoute(strings.NewReader(tc.table)); got != tc.want {
			t.Errorf("hasDefaultRoute(%q) = %v", tc.table, got)
		}
	}
	if conditionHolds("sunrise") {
		t.Error("an unknown condition holds")
	}
}

type recordMounter struct {
	calls []string
	fail  string
}

func (m *recordMounter) Mount(source, target, fstype string, flags uintptr, data string) error {
	m.calls = append(m.calls, strings.Join([]string{source, target, fstype, flagNames(flags), data}, " "))
	if source == m.fail {
		return syscall.ENODEV
	}
	return nil
}
func (m *recordMounter) Unmount(string, int) error { return nil }

func flagNames(f uintptr) string {
	var n []string
	for _, name := range []string{"ro", "nosuid", "nodev", "noexec", "noatime"} {
		if f&mountFlags[name] != 0 {
			n = append(n, name)
		}
	}
	return strings.Join(n, "+")
}

func TestMountDevices(t *testing.T) {
	m := &recordMounter{fail: "/dev/vdc"}
	var logged []string
	done := mountConfigured(m, []contract.Mount{
		{Source: "/dev/vdb1", Type: "ext4", Target: "/mnt/data", Options: "noatime,nodev,commit=30"},
		{Source: "/dev/vdc", Type: "vfat", Target: "/mnt/usb", Options: "ro"},
		{Source: "/dev/vdd", Type: "ext4", Target: "/mnt/d", Options: "rw,defaults"},
	}, func(f string, a ...any) { logged = append(logged, f) })
	want := []string{"/dev/vdb1 /mnt/data ext4 nodev+noatime commit=30", "/dev/vdc /mnt/usb vfat ro ", "/dev/vdd /mnt/d ext4  "}
	if strings.Join(m.calls, "|") != strings.Join(want, "|") {
		t.Errorf("mounts %q, want %q", m.calls, want)
	}
	if strings.Join(done, " ") != "/mnt/data /mnt/d" || len(logged) != 1 {
		t.Errorf("mounted %q, logged %q: the failed one is logged and left out", done, logged)
	}
}
