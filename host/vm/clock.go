package vm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	nvkernel "github.com/nvboot/nvboot/host/kernel"
)

// DefaultCPURate is the device clock's default: a 1-GIPS in-order core,
// one instruction per nanosecond.
const DefaultCPURate = 1_000_000_000

// Clock names how guest time passes in a measurement.
const (
	// ClockWall: guest time is the host's time. Faithful to a device only
	// when the guest runs at hardware speed (KVM).
	ClockWall = "wall"
	// ClockDevice: QEMU counts guest instructions as time (-icount
	// shift=N,sleep=off) at a fixed rate, and when the guest idles its
	// clock jumps to its next timer. What a boot costs is then the same on
	// any host, however fast or loaded, as long as the guest waits only
	// for itself (see Config.CPURate and docs/DEVICE-CLOCK.md).
	ClockDevice = "device"
)

// DeviceEpoch is the guest's calendar at power-on under the device clock:
// a fixed instant, so that every boot of a measurement is the same boot.
// A guest that needs the real date (TLS to the outside) runs on the wall
// clock.
var DeviceEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ICountShift is QEMU's -icount shift for a rate in instructions per
// second: each instruction counts 2^shift ns, so the rate must be 1e9
// divided by a power of two (1e9, 5e8, 2.5e8, ...).
func ICountShift(rate int64) (int, error) {
	for shift := 0; shift <= 9; shift++ {
		if DefaultCPURate>>shift == rate && DefaultCPURate%(1<<shift) == 0 {
			return shift, nil
		}
	}
	return 0, fmt.Errorf("cpu rate %d instructions/s: QEMU's instruction counter takes 1e9 divided by a power of two (1000000000, 500000000, 250000000, ... down to %d)", rate, DefaultCPURate>>9)
}

// Ports of QEMU's debug devices the kernel-entry probe uses.
const (
	debugExitPort = 0xf4 // isa-debug-exit: a write of v ends QEMU with status v<<1|1
	debugConPort  = 0xe9 // isa-debugcon: bytes written go to a chardev
)

// entryCodeOffset is where the probe's code goes in the bzImage: right
// after the boot protocol header (which ends at 0x26c in protocol 2.15, the
// newest), within reach of the 2-byte jump at 0x200 that starts the setup
// code.
const entryCodeOffset = 0x270

// entryCode reads the TSC, writes it to the debug console (8 bytes,
// little-endian), and exits QEMU through isa-debug-exit. bits is the mode
// the firmware enters the kernel in: 16 (real mode, a bzImage's setup
// code) or 32 (flat protected mode, the PVH entry), which differ only in
// which instructions need the operand-size prefix 0x66.
func entryCode(bits int) []byte {
	p16, p32 := []byte{0x66}, []byte(nil) // prefix for a 32-bit op, for a 16-bit op
	if bits == 32 {
		p16, p32 = nil, []byte{0x66}
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	c := cat([]byte{0x0f, 0x31}, p16, []byte{0x89, 0xd3}, p32, []byte{0xba, debugConPort, 0x00}) // rdtsc; mov ebx, edx; mov dx, 0xe9
	for i := range 8 {
		if i == 4 {
			c = cat(c, p16, []byte{0x89, 0xd8}) // mov eax, ebx: the high half
		}
		c = cat(c, []byte{0xee}, p16, []byte{0xc1, 0xe8, 0x08}) // out dx, al; shr eax, 8
	}
	return append(c, 0xb0, probeByte, 0xe6, debugExitPort, 0xf4, 0xeb, 0xfd) // mov al, 0x31; out 0xf4, al; hlt; jmp $-1
}

// entryKernel is kernel with its first instruction made the probe: a
// bzImage's setup code jumps to entryCode, a PVH vmlinux's entry point is
// overwritten with it (the kernel never runs; only its size and the
// firmware's work for it matter).
func entryKernel(kernel []byte) ([]byte, error) {
	if bytes.HasPrefix(kernel, []byte("\x7fELF")) {
		return entryPVH(kernel)
	}
	if len(kernel) < 0x400 || string(kernel[0x202:0x206]) != "HdrS" {
		return nil, fmt.Errorf("neither an x86 bzImage (no HdrS at 0x202) nor an ELF")
	}
	setup := (int(kernel[0x1f1]) + 1) * 512
	if kernel[0x1f1] == 0 {
		setup = 5 * 512
	}
	code := entryCode(16)
	if kernel[0x200] != 0xeb || setup < entryCodeOffset+len(code) {
		return nil, fmt.Errorf("bzImage setup code not as the boot protocol lays it out (jump %#x, %d setup bytes)", kernel[0x200], setup)
	}
	k := append([]byte(nil), kernel...)
	k[0x200], k[0x201] = 0xeb, byte(entryCodeOffset-0x202)
	copy(k[entryCodeOffset:], code)
	return k, nil
}

// entryPVH is a PVH vmlinux with the probe at its entry point.
func entryPVH(kernel []byte) ([]byte, error) {
	off, err := nvkernel.PVHEntryIn(bytes.NewReader(kernel), "the kernel")
	if err != nil {
		return nil, err
	}
	code := entryCode(32)
	if off+int64(len(code)) > int64(len(kernel)) {
		return nil, fmt.Errorf("PVH entry at file offset %#x too close to the end", off)
	}
	k := append([]byte(nil), kernel...)
	copy(k[off:], code)
	return k, nil
}

// KernelEntry measures, under the device clock, when the firmware hands
// over to the kernel: the guest time from power-on to the kernel's first
// instruction. It boots c (firmware, devices and all) with a copy of the
// kernel whose first setup instruction is replaced by code that reads the
// TSC (the guest's clock since power-on under -icount) and reports it, so
// the firmware does exactly what it does for the real kernel, the same
// number of bytes loaded. The kernel's own clocks cannot tell: their zero
// comes later, and early on they run ahead of the guest's time.
func KernelEntry(ctx context.Context, c Config) (time.Duration, error) {
	if c.CPURate == 0 {
		return 0, errors.New("vm: the kernel's entry is measured on the device clock (a CPU rate)")
	}
	if c.BootDisk {
		return 0, errors.New("vm: the kernel entry probe replaces a directly booted kernel (Kernel); with BootDisk the firmware boots the disk's own")
	}
	kernel, err := os.ReadFile(c.Kernel)
	if err != nil {
		return 0, fmt.Errorf("vm: kernel entry probe: %w", err)
	}
	// The probe is the board's own: the pc board's reports the TSC on a
	// debug console, the virt board's its counter on the PL011.
	build, read := entryKernel, readEntryPC
	if c.Arch == ArchArm64 {
		build, read = entryImageArm64, readEntryArm64
	}
	probe, err := build(kernel)
	if err != nil {
		return 0, fmt.Errorf("vm: kernel entry probe: %s: %w", c.Kernel, err)
	}
	dir, err := os.MkdirTemp("", "nvboot-entry-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	c.Kernel = filepath.Join(dir, filepath.Base(c.Kernel))
	if err := os.WriteFile(c.Kernel, probe, 0o644); err != nil {
		return 0, err
	}
	c.Console, c.Stdin = nil, nil
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return read(ctx, c, dir)
}

// readEntryPC boots c, the probe kernel on the pc board, and reads the TSC
// it wrote to a debug console kept in dir.
func readEntryPC(ctx context.Context, c Config, dir string) (time.Duration, error) {
	out := filepath.Join(dir, "debugcon")
	c.Extra = append(append([]string(nil), c.Extra...),
		"-device", fmt.Sprintf("isa-debug-exit,iobase=%#x,iosize=0x04", debugExitPort),
		"-chardev", "file,id=entry,path="+out,
		"-device", fmt.Sprintf("isa-debugcon,iobase=%#x,chardev=entry", debugConPort))
	m, err := Start(ctx, c)
	if err != nil {
		return 0, err
	}
	werr := m.Wait(ctx)
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != probeExitCode {
		m.Kill()
		return 0, fmt.Errorf("vm: kernel entry probe: the probe kernel did not run to its exit (%v)", werr)
	}
	b, err := os.ReadFile(out)
	if err != nil || len(b) != 8 {
		return 0, fmt.Errorf("vm: kernel entry probe: want 8 bytes on the debug console, got %d (%v)", len(b), err)
	}
	return time.Duration(binary.LittleEndian.Uint64(b)), nil
}
