package vm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// panickingQEMU writes a shell script standing in for QEMU: it prints console
// (the guest's serial output on stdout) and then hangs, as QEMU does once
// the guest kernel has panicked (without panic=, the kernel waits forever).
func panickingQEMU(t *testing.T, console string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "qemu")
	script := "#!/bin/sh\ncat <<'EOF'\n" + console + "EOF\nexec sleep 600\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A boot whose console shows a kernel panic ends at once: QEMU is stopped,
// and Wait (and Expect) give an error carrying the panic line and its likely
// cause, which names the disk image when the root did not mount.
func TestKernelPanicEndsBoot(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk.img")
	os.WriteFile(disk, make([]byte, 4096), 0o644)
	for _, tt := range []struct {
		name, console string
		want          []string
	}{
		{"root not mounted", "[    0.61] VFS: Cannot open root device \"vda2\" or unknown-block(0,0): error -6\n" +
			"[    0.62] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n" +
			"[    0.62] CPU: 0 PID: 1 Comm: swapper Not tainted 6.1.0 #1\n",
			[]string{"Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)", "root filesystem", disk, "truncated"}},
		{"init died", "[    0.90] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100\n",
			[]string{"Attempted to kill init", "init (PID 1) exited"}},
		{"init not loaded", "ld-off2f: /sbin/nvinit: /nv/text/ab: damaged: CRC-32C of its segments is 0x1, the note's 0x2; fallback /lib/off2f/ab: cannot open: No such file or directory\n" +
			"[    0.90] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00007f00\n",
			[]string{"Attempted to kill init", "the OFF2F loader could not load init (PID 1): ld-off2f: /sbin/nvinit: /nv/text/ab: damaged", "fallback /lib/off2f/ab: cannot open"}},
		{"no init", "[    0.90] Kernel panic - not syncing: No working init found.  Try passing init= option to kernel.\n",
			[]string{"No working init found", "could not run init"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Start(ctxFor(t, 5*time.Minute), Config{QEMU: panickingQEMU(t, tt.console), Kernel: "bz", Accel: "tcg",
				Disks: []Disk{{Path: disk}}})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Kill()
			_, experr := m.ExpectString(ctxFor(t, 2*time.Minute), "never printed")
			err = m.Wait(ctxFor(t, 2*time.Minute))
			var pe *PanicError
			if !errors.As(err, &pe) {
				t.Fatalf("Wait: %v, want a PanicError (QEMU stopped at the panic)", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if !strings.HasPrefix(pe.Line, "Kernel panic - not syncing") && !strings.Contains(pe.Line, "] Kernel panic - not syncing") {
				t.Errorf("Line %q", pe.Line)
			}
			if experr == nil || !strings.Contains(experr.Error(), "Kernel panic") {
				t.Errorf("Expect: %v, want the panic named", experr)
			}
		})
	}
}

// With Reboot, a panic the kernel reboots from (panic=N) is a reset like
// any other: QEMU runs on and a later power-off ends the run cleanly. One
// the kernel stops at still ends QEMU at once, with its PanicError.
func TestPanicWithReboot(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk.img")
	os.WriteFile(disk, make([]byte, 4096), 0o644)
	const panicked = "[    0.62] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n" +
		"[    0.62] CPU: 0 PID: 1 Comm: swapper Not tainted 6.1.0 #1\n"
	start := func(t *testing.T, script string) *Machine {
		p := filepath.Join(t.TempDir(), "qemu")
		os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755)
		m, err := Start(ctxFor(t, 5*time.Minute), Config{QEMU: p, Kernel: "bz", Accel: "tcg", Reboot: true, Disks: []Disk{{Path: disk}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Kill)
		return m
	}
	t.Run("rebooted", func(t *testing.T) {
		// The board resets after the panic, boots again and powers off.
		m := start(t, "cat <<'EOF'\n"+panicked+"[    0.70] Rebooting in 10 seconds..\n[    0.00] Linux version 6.1.0\nreboot: Power down\nEOF\nexit 0\n")
		if err := m.Wait(ctxFor(t, 2*time.Minute)); err != nil {
			t.Fatalf("Wait: %v, want the clean end of the boot after the reset", err)
		}
		if !strings.Contains(m.Console(), "Power down") {
			t.Errorf("the run ended before the boot after the panic:\n%s", m.Console())
		}
	})
	t.Run("stopped", func(t *testing.T) {
		m := start(t, "cat <<'EOF'\n"+panicked+"[    0.70] ---[ end Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0) ]---\nEOF\nexec sleep 600\n")
		var pe *PanicError
		if err := m.Wait(ctxFor(t, 2*time.Minute)); !errors.As(err, &pe) || !strings.Contains(pe.Line, "Unable to mount root fs") {
			t.Fatalf("Wait: %v, want the PanicError", err)
		}
	})
}
