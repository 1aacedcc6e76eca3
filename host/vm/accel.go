package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// AccelEnv names the environment variable that forces an accelerator
// ("kvm" or "tcg") wherever a Config leaves Accel empty: tests and CI use it
// to pin one.
const AccelEnv = "NVBOOT_ACCEL"

// KVM ioctls (linux/kvm.h): _IO(KVMIO=0xAE, nr).
const (
	kvmGetAPIVersion = 0xAE00
	kvmCreateVM      = 0xAE01
	kvmCreateVCPU    = 0xAE41
	kvmAPIVersion    = 12
)

// probeTimeout bounds the probe guest. A working KVM runs it in
// milliseconds; the time goes to QEMU's own start.
const probeTimeout = 15 * time.Second

// KVMUsable reports whether KVM can really run an x86 guest with the given
// QEMU here, and if not, why. An openable /dev/kvm is not enough, nor is a
// QEMU that starts with -accel kvm: some hosts expose KVM for one special
// paravirtual guest type only (the kvm_pvm module, no vmx flag), where a VM
// and a vCPU can be created and a paused QEMU quits cleanly, but a real
// guest never executes an instruction. So after the cheap ioctl checks it
// boots a guest of its own (a 64 KiB firmware whose reset vector writes one
// byte to QEMU's isa-debug-exit port) and only a guest that exits through
// that port counts. The answer is remembered per QEMU binary.
func KVMUsable(qemu string) (bool, string) {
	probeMu.Lock()
	defer probeMu.Unlock()
	if r, ok := probed[qemu]; ok {
		return r.ok, r.why
	}
	ok, why := kvmIoctls()
	if ok {
		ok, why = probeGuest(qemu, "kvm")
	}
	probed[qemu] = probeResult{ok, why}
	return ok, why
}

type probeResult struct {
	ok  bool
	why string
}

// The probe's result is a fact about this host and QEMU binary; booting a
// guest for every VM a test suite starts would cost seconds each.
var (
	probeMu sync.Mutex
	probed  = map[string]probeResult{}
)

// probeExitCode is what QEMU exits with when the probe firmware ran:
// isa-debug-exit turns a write of v into exit status (v<<1)|1.
const (
	probeByte     = 0x31
	probeExitCode = probeByte<<1 | 1
)

// probeFirmware is a 64 KiB BIOS image (QEMU wants a multiple of 64 KiB)
// whose last 16 bytes, where an x86 CPU starts after reset (F000:FFF0), are:
//
//	mov al, 0x31 ; out 0xf4, al ; hlt ; jmp $-1
func probeFirmware() []byte {
	fw := make([]byte, 64<<10)
	copy(fw[len(fw)-16:], []byte{0xb0, probeByte, 0xe6, 0xf4, 0xf4, 0xeb, 0xfd})
	return fw
}

// probeGuest runs the probe firmware under accel and reports whether it ran.
func probeGuest(qemu, accel string) (bool, string) {
	dir, err := os.MkdirTemp("", "nvboot-kvm-probe-")
	if err != nil {
		return false, "KVM probe: " + err.Error()
	}
	defer os.RemoveAll(dir)
	fw := filepath.Join(dir, "probe.bin")
	if err := os.WriteFile(fw, probeFirmware(), 0o644); err != nil {
		return false, "KVM probe: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-accel", accel, "-cpu", cpuModel(accel), "-machine", "pc",
		"-nodefaults", "-no-user-config", "-display", "none", "-monitor", "none", "-serial", "none",
		"-bios", fw, "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return false, fmt.Sprintf("a guest did not run: QEMU started with -accel %s, but its probe guest executed nothing in %v (a KVM that runs only paravirtual guests, such as kvm_pvm?)", accel, probeTimeout)
	case errors.As(err, &ee) && ee.ExitCode() == probeExitCode:
		return true, ""
	case err == nil:
		return false, "QEMU with -accel " + accel + " exited without running the probe guest"
	default:
		msg := strings.TrimSpace(string(out))
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		return false, "QEMU with -accel " + accel + " fails: " + err.Error() + ": " + msg
	}
}

// kvmIoctls checks /dev/kvm as far as creating a VM and a vCPU.
func kvmIoctls() (bool, string) {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false, err.Error()
	}
	defer f.Close()
	ioctl := func(fd uintptr, req uintptr) (uintptr, syscall.Errno) {
		r, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, req, 0)
		return r, e
	}
	if v, e := ioctl(f.Fd(), kvmGetAPIVersion); e != 0 || v != kvmAPIVersion {
		return false, "/dev/kvm: unexpected KVM API version"
	}
	vmfd, e := ioctl(f.Fd(), kvmCreateVM)
	if e != 0 {
		return false, "/dev/kvm: KVM_CREATE_VM: " + e.Error()
	}
	defer syscall.Close(int(vmfd))
	cpufd, e := ioctl(vmfd, kvmCreateVCPU)
	if e != 0 {
		return false, "/dev/kvm: KVM_CREATE_VCPU: " + e.Error()
	}
	syscall.Close(int(cpufd))
	return true, ""
}

// ChooseAccel returns the accelerator to use when none is asked for:
// $NVBOOT_ACCEL when set (an error when it is neither kvm nor tcg, or kvm
// where KVM does not run a guest), else "kvm" when KVM really works here and
// "tcg" otherwise, with the reason when it is TCG.
func ChooseAccel(qemu string) (accel, why string, err error) {
	switch env := os.Getenv(AccelEnv); env {
	case "":
	case "tcg":
		return "tcg", AccelEnv + "=tcg", nil
	case "kvm":
		if ok, why := KVMUsable(qemu); !ok {
			return "", "", fmt.Errorf("%s=kvm: KVM does not work here (%s); set %s=tcg or unset it", AccelEnv, why, AccelEnv)
		}
		return "kvm", "", nil
	default:
		return "", "", fmt.Errorf("%s=%q: want kvm or tcg (or unset: KVM when it really works here)", AccelEnv, env)
	}
	if ok, why := KVMUsable(qemu); ok {
		return "kvm", "", nil
	} else {
		return "tcg", why, nil
	}
}

// SilentHint explains a boot that printed nothing on its console: which
// accelerator ran it and how to choose the other. "" when the guest printed
// something.
func (m *Machine) SilentHint() string {
	if len(m.Lines()) > 0 {
		return ""
	}
	other := "kvm"
	if m.Accel == "kvm" {
		other = "tcg"
	}
	return fmt.Sprintf("the guest printed nothing on its console under -accel %s; try the other accelerator: %s=%s (or -accel %s)",
		m.Accel, AccelEnv, other, other)
}

// ConsoleTail is the last n console lines, for an error message; for a
// guest that printed nothing, SilentHint instead.
func (m *Machine) ConsoleTail(n int) string {
	if h := m.SilentHint(); h != "" {
		return "(empty) " + h
	}
	return LastLines(m.Console(), n)
}
