package vm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/vm/vmtest"
)

func TestICountShift(t *testing.T) {
	for rate, want := range map[int64]int{1e9: 0, 5e8: 1, 250e6: 2, 1953125: 9} {
		if got, err := ICountShift(rate); err != nil || got != want {
			t.Errorf("ICountShift(%d) = %d, %v; want %d", rate, got, err, want)
		}
	}
	for _, bad := range []int64{0, -1, 2e9, 3e8, 1953125 / 2} {
		if _, err := ICountShift(bad); err == nil || !strings.Contains(err.Error(), "power of two") {
			t.Errorf("ICountShift(%d): %v", bad, err)
		}
	}
}

func TestDeviceClockArgs(t *testing.T) {
	c := Config{Kernel: "bzImage", CPURate: 5e8}
	a, err := c.args("tcg")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(a, " "), "-icount shift=1,sleep=on") {
		t.Errorf("no -icount in %q", a)
	}
	if _, err := c.args("kvm"); err == nil || !strings.Contains(err.Error(), "needs -accel tcg") {
		t.Errorf("device clock under kvm: %v", err)
	}
	c.CPURate = 3e8
	if _, err := c.args("tcg"); err == nil {
		t.Error("a rate that is not 1e9/2^n: no error")
	}
}

func TestEntryKernelRefusesOtherFiles(t *testing.T) {
	if _, err := entryKernel([]byte("#!/bin/sh\necho not a kernel\n")); err == nil || !strings.Contains(err.Error(), "HdrS") {
		t.Errorf("a script: %v", err)
	}
}

// The guest's clock under -icount is what the device clock rests on: the
// probe kernel reads the TSC at the kernel's first instruction, which must
// come after power-on and within the firmware's few milliseconds; and a
// CPU-bound stretch must cost what its instruction count says, doubling
// when the rate halves.
func TestKernelEntryAndRate(t *testing.T) {
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	ctx := ctxFor(t, 3*time.Minute)
	entry, err := KernelEntry(ctx, Config{Kernel: k, CPURate: DefaultCPURate})
	if err != nil {
		t.Fatal(err)
	}
	// SeaBIOS reaches the kernel in about 7 ms of guest time at 1 GIPS;
	// a bound of a second still catches a TSC that does not count guest
	// time from power-on (wall-clock TCG gives the host's TSC: far more).
	if entry <= 0 || entry > time.Second {
		t.Fatalf("kernel entry at %v after power-on", entry)
	}
	busy := func(rate int64) time.Duration {
		res, err := RunScript(ctx, Config{Kernel: k, CPURate: rate}, Script{
			// 2e7 iterations of busybox shell arithmetic would take minutes;
			// a counted loop in awk is CPU-bound and cheap to emulate.
			Script: `t0=$(cut -d' ' -f1 /proc/uptime); awk 'BEGIN{for(i=0;i<200000;i++)s+=i}'; t1=$(cut -d' ' -f1 /proc/uptime); echo "BUSY $t0 $t1"`,
		})
		if err != nil || res.Status != 0 {
			t.Fatalf("rate %d: %v (status %d)\n%s", rate, err, res.Status, res.Console)
		}
		for _, l := range strings.Split(res.Console, "\n") {
			var a, b float64
			if _, err := fmt.Sscanf(l, "BUSY %f %f", &a, &b); err == nil {
				return time.Duration((b - a) * float64(time.Second))
			}
		}
		t.Fatalf("rate %d: no BUSY line\n%s", rate, res.Console)
		return 0
	}
	full, half := busy(DefaultCPURate), busy(DefaultCPURate/2)
	t.Logf("kernel entry %v; CPU-bound stretch %v at 1e9, %v at 5e8", entry, full, half)
	if r := float64(half) / float64(full); r < 1.8 || r > 2.2 {
		t.Errorf("a CPU-bound stretch took %v at 1e9 and %v at 5e8 instructions/s: ratio %.3f, want 2 ± 10%%", full, half, r)
	}

}
