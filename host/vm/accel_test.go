package vm

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The probe firmware really runs and exits through isa-debug-exit: under
// TCG, which always executes it, the probe must say the guest ran. (Under
// KVM the same firmware decides whether KVM is usable.)
func TestProbeFirmwareRunsUnderTCG(t *testing.T) {
	if testing.Short() {
		t.Skip("starts QEMU (-short)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64")
	}
	if ok, why := probeGuest("qemu-system-x86_64", "tcg"); !ok {
		t.Fatalf("probe guest did not run under TCG: %s", why)
	}
}

// A QEMU that starts but never runs the guest's code is not usable: a
// stand-in "QEMU" that sleeps models the kvm_pvm host, where a paused QEMU
// quits cleanly and a real guest prints nothing.
func TestProbeSilentGuestIsNotUsable(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the probe timeout (-short)")
	}
	ok, why := probeGuest(fakeQEMU(t, "exec sleep 600"), "kvm")
	if ok || !strings.Contains(why, "executed nothing") {
		t.Fatalf("silent guest: ok=%v why=%q", ok, why)
	}
}

func TestProbeCleanExitWithoutGuestIsNotUsable(t *testing.T) {
	ok, why := probeGuest(fakeQEMU(t, "exit 0"), "kvm")
	if ok || !strings.Contains(why, "without running the probe guest") {
		t.Fatalf("clean exit: ok=%v why=%q", ok, why)
	}
	ok, why = probeGuest(fakeQEMU(t, "echo 'kvm_buf_set_msrs: Assertion failed' >&2; kill -ABRT $$"), "kvm")
	if ok || !strings.Contains(why, "kvm_buf_set_msrs") {
		t.Fatalf("abort: ok=%v why=%q", ok, why)
	}
}

func TestChooseAccelFromEnv(t *testing.T) {
	t.Setenv(AccelEnv, "tcg")
	if a, _, err := ChooseAccel(fakeQEMU(t, "exit 1")); err != nil || a != "tcg" {
		t.Fatalf("%s=tcg: %q, %v", AccelEnv, a, err)
	}
	t.Setenv(AccelEnv, "hvf")
	if _, _, err := ChooseAccel("qemu-system-x86_64"); err == nil || !strings.Contains(err.Error(), `NVBOOT_ACCEL="hvf": want kvm or tcg`) {
		t.Fatalf("%s=hvf: %v", AccelEnv, err)
	}
	t.Setenv(AccelEnv, "kvm")
	if _, _, err := ChooseAccel(fakeQEMU(t, "exit 0")); err == nil && kvmWorksForIoctls() {
		t.Fatalf("%s=kvm with a QEMU that runs nothing: no error", AccelEnv)
	} else if err != nil && !strings.Contains(err.Error(), "NVBOOT_ACCEL=kvm: KVM does not work here") {
		t.Fatalf("%s=kvm: %v", AccelEnv, err)
	}
}

func kvmWorksForIoctls() bool { ok, _ := kvmIoctls(); return ok }

func TestSilentHint(t *testing.T) {
	m := &Machine{Accel: "kvm"}
	if h := m.SilentHint(); !strings.Contains(h, "-accel kvm") || !strings.Contains(h, "NVBOOT_ACCEL=tcg") {
		t.Errorf("kvm hint: %q", h)
	}
	m = &Machine{Accel: "tcg", lines: []Line{{Text: "Linux version"}}}
	if h := m.SilentHint(); h != "" {
		t.Errorf("a guest that printed got a hint: %q", h)
	}
}

// fakeQEMU writes a shell script standing in for QEMU.
func fakeQEMU(t *testing.T, body string) string {
	t.Helper()
	p := t.TempDir() + "/qemu"
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
