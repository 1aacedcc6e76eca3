package vm

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// KVM ioctls (linux/kvm.h): _IO(KVMIO=0xAE, nr).
const (
	kvmGetAPIVersion = 0xAE00
	kvmCreateVM      = 0xAE01
	kvmCreateVCPU    = 0xAE41
	kvmAPIVersion    = 12
)

// KVMUsable reports whether KVM can really run an x86 guest with the given
// QEMU here, and if not, why. An openable /dev/kvm is not enough: some hosts
// expose it for one special paravirtual guest type only, where a VM and a vCPU
// can be created but QEMU aborts setting up the vCPU's MSRs. So after the
// cheap ioctl checks it starts QEMU itself with KVM, paused, and asks it to
// quit: only a clean exit counts.
func KVMUsable(qemu string) (bool, string) {
	if ok, why := kvmIoctls(); !ok {
		return false, why
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-accel", "kvm", "-cpu", "host", "-machine", "pc",
		"-nodefaults", "-no-user-config", "-display", "none", "-monitor", "stdio", "-S")
	cmd.Stdin = strings.NewReader("quit\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		return false, "QEMU with KVM fails: " + err.Error() + ": " + msg
	}
	return true, ""
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
