package vm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nvkernel "github.com/nvboot/nvboot/host/kernel"
	"github.com/nvboot/nvboot/host/vm/vmtest"
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
	c := Config{Kernel: "bzImage", CPURate: 5e8, Forwards: []Forward{{Host: 18080, Guest: 8080}}}
	a, err := c.args("tcg")
	if err != nil {
		t.Fatal(err)
	}
	// Not deterministic: idle time passes as the host's, for guests that
	// wait on a virtio disk.
	if line := strings.Join(a, " "); !strings.Contains(line, "-icount shift=1,sleep=on") || strings.Contains(line, "-seed") || !strings.Contains(line, "virtio-rng-pci") {
		t.Errorf("device clock, not deterministic: %q", a)
	}
	c.Deterministic = true
	if a, err = c.args("tcg"); err != nil {
		t.Fatal(err)
	}
	// Everything the guest sees on its own clock: instructions as time,
	// idle waits jumping to its timers, random numbers from a seed, the
	// calendar on the virtual clock from a fixed instant, and no
	// virtio-rng, whose answers come at a host time.
	line := strings.Join(a, " ")
	for _, want := range []string{"-icount shift=1,sleep=off", "-seed 1", "-rtc base=2026-01-01T00:00:00,clock=vm", "random.trust_cpu=on", "user,id=n0,ipv6=off,", "virtio-net-pci,netdev=n0,ioeventfd=off"} {
		if !strings.Contains(line, want) {
			t.Errorf("no %s in %q", want, a)
		}
	}
	if strings.Contains(line, "virtio-rng") {
		t.Errorf("virtio-rng on the device clock: %q", a)
	}
	// The fast string features off: -icount would charge REP STOSB a byte
	// an instruction.
	if !strings.Contains(line, "-cpu max,erms=off,fsrm=off ") {
		t.Errorf("device clock with ERMS: %q", a)
	}
	c.CPURate, c.Deterministic = 0, false
	if wall, _ := c.args("tcg"); !strings.Contains(strings.Join(wall, " "), "virtio-rng-pci") || strings.Contains(strings.Join(wall, " "), "-seed") {
		t.Errorf("the wall clock keeps virtio-rng and real randomness: %q", wall)
	} else if !strings.Contains(strings.Join(wall, " "), "-cpu max ") {
		t.Errorf("the wall clock's CPU is every feature TCG has: %q", wall)
	}
	c.CPURate = 5e8
	if _, err := c.args("kvm"); err == nil || !strings.Contains(err.Error(), "needs -accel tcg") {
		t.Errorf("device clock under kvm: %v", err)
	}
	c.CPURate = 3e8
	if _, err := c.args("tcg"); err == nil {
		t.Error("a rate that is not 1e9/2^n: no error")
	}
}

func TestEntryKernelRefusesOtherFiles(t *testing.T) {
	if _, err := entryKernel([]byte("#!/bin/sh\necho not a kernel\n")); err == nil || !strings.Contains(err.Error(), "neither") {
		t.Errorf("a script: %v", err)
	}
	if _, err := KernelEntry(context.Background(), Config{Arch: ArchArm64, BootDisk: true, CPURate: DefaultCPURate}); err == nil || !strings.Contains(err.Error(), "BootDisk") {
		t.Errorf("a board booting its disk: %v, want a refusal naming BootDisk", err)
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
	// The same kernel uncompressed, entered at its PVH entry point (the
	// kernel region's boot): the probe runs there instead, in 32-bit mode.
	if vmlinux, err := nvkernel.Uncompressed(k); err != nil {
		t.Fatal(err)
	} else if vmlinux != "" {
		pvh, err := KernelEntry(ctx, Config{Kernel: vmlinux, CPURate: DefaultCPURate})
		if err != nil {
			t.Fatalf("PVH entry: %v", err)
		}
		if pvh <= 0 || pvh > time.Second {
			t.Fatalf("PVH kernel entry at %v after power-on", pvh)
		}
		t.Logf("PVH kernel entry %v", pvh)
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

// Under the device clock a throttled disk's waits count, but not in full:
// QEMU's throttling waits on the host's clock, and the guest work that
// overlaps each wait (the request's path through the kernel, the virtio
// exits into QEMU) runs at emulation speed yet counts only its instruction
// count. Measured on a 2-core host: a 128 MiB direct read in 1 MiB requests
// costs 0.81 of what the profile's bandwidth says, 1500 direct 4 KiB reads
// 0.59 of what its IOPS say (docs/BENCHMARKS.md, "The device clock"). The
// bounds hold the model to that: a bandwidth-bound read within 30 % of the
// profile, an IOPS-bound one above 40 %, neither faster than the profile
// by more than QEMU's burst allowance (a tenth of a second's worth).
func TestStorageModelUnderDeviceClock(t *testing.T) {
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	disk := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const size = 128 << 20
	if err := os.Truncate(disk, size); err != nil {
		t.Fatal(err)
	}
	sd, err := Profile("sd")
	if err != nil {
		t.Fatal(err)
	}
	const reads = 1500
	res, err := RunScript(ctxFor(t, 5*time.Minute), Config{Kernel: k, CPURate: DefaultCPURate,
		Disks: []Disk{{Path: disk, Storage: sd, ReadOnly: true}}}, Script{Script: `
up() { cut -d' ' -f1 /proc/uptime; }
t0=$(up); dd if=/dev/vda of=/dev/null bs=1M count=128 iflag=direct 2>/dev/null; t1=$(up)
dd if=/dev/vda of=/dev/null bs=4k count=` + fmt.Sprint(reads) + ` iflag=direct 2>/dev/null; t2=$(up)
echo "READS $t0 $t1 $t2"`})
	if err != nil || res.Status != 0 {
		t.Fatalf("%v (status %d)\n%s", err, res.Status, res.Console)
	}
	var t0, t1, t2 float64
	for _, l := range strings.Split(res.Console, "\n") {
		if _, err := fmt.Sscanf(l, "READS %f %f %f", &t0, &t1, &t2); err == nil {
			break
		}
	}
	if t2 == 0 {
		t.Fatalf("no READS line\n%s", res.Console)
	}
	for _, c := range []struct {
		what      string
		got, want float64
		low       float64
	}{
		{"128 MiB in 1 MiB reads", t1 - t0, float64(size) / float64(sd.ReadBPS), 0.7},
		{fmt.Sprintf("%d reads of 4 KiB", reads), t2 - t1, float64(reads) / float64(sd.ReadIOPS), 0.4},
	} {
		t.Logf("%s: %.3f s of guest time, the profile says %.3f s (%.2f of it)", c.what, c.got, c.want, c.got/c.want)
		if c.got < c.low*c.want || c.got > 1.1*c.want {
			t.Errorf("%s took %.3f s of guest time; the %s profile says %.3f s: want %.0f %% to 110 %% of it", c.what, c.got, sd.Name, c.want, 100*c.low)
		}
	}
}

func TestFirmwareArgs(t *testing.T) {
	if a, err := firmwareArgs("seabios", false); err != nil || a != nil {
		t.Errorf("seabios: %q, %v; want QEMU's default", a, err)
	}
	a, err := firmwareArgs("", false)
	if _, statErr := os.Stat(QBoot); statErr == nil {
		if err != nil || strings.Join(a, " ") != "-bios "+QBoot {
			t.Errorf("default with qboot installed: %q, %v", a, err)
		}
	} else if err != nil || a != nil {
		t.Errorf("default without qboot: %q, %v", a, err)
	}
	if _, err := firmwareArgs("/nonexistent/ovmf.fd", false); err == nil || !strings.Contains(err.Error(), "/nonexistent/ovmf.fd") {
		t.Errorf("a missing firmware: %v", err)
	}
}
