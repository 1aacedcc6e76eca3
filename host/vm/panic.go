package vm

import (
	"context"
	"fmt"
	"strings"
	"syscall"
)

// A guest kernel that panics stays up forever (the appliance's command line
// has no panic=): QEMU runs on, the console says nothing more, and whoever
// waits for the guest waits until killed. So every boot watches its console
// for the panic line and ends at once when it comes, with an error carrying
// the line and what it likely means.

// panicMarker starts the kernel's panic message (kernel/panic.c).
const panicMarker = "Kernel panic - not syncing"

// PanicError is the error of a boot that ended in a guest kernel panic.
type PanicError struct {
	Line  string // the panic line, as on the console
	Cause string // what it likely means, and what to look at
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("vm: the guest kernel panicked: %q; likely cause: %s", e.Line, e.Cause)
}

// The kernel's lines after a panic (kernel/panic.c): with panic=N (N > 0)
// it says it reboots and resets the machine; otherwise it prints the end
// line and stops for good.
const (
	panicRebootMarker = "Rebooting in "
	panicEndMarker    = "---[ end Kernel panic"
)

// stopAtPanic stops QEMU as soon as m's console shows a kernel panic; it
// returns when QEMU has ended either way. What the panic was, findPanic
// tells from the console once QEMU is gone. With reboot (Config.Reboot)
// a panic the kernel reboots from is a reset like any other: QEMU runs
// on, and only a panic that stops the kernel stops QEMU.
func stopAtPanic(m *Machine, reboot bool) {
	ctx := context.Background()
	for from := 0; ; {
		_, i, err := m.Expect(ctx, from, isPanic)
		if err != nil {
			return
		}
		if reboot {
			l, j, err := m.Expect(ctx, i+1, func(s string) bool {
				return strings.Contains(s, panicRebootMarker) || strings.Contains(s, panicEndMarker)
			})
			if err != nil {
				return
			}
			if strings.Contains(l.Text, panicRebootMarker) {
				m.mu.Lock()
				m.panicFrom = j + 1
				m.mu.Unlock()
				from = j + 1
				continue
			}
		}
		m.cmd.Process.Kill()
		return
	}
}

// haltedMarker is what the kernel prints when it halts: a power-off on a
// machine that cannot power off (x86 without ACPI) ends there too.
const haltedMarker = "reboot: System halted"

// endAtHalt ends QEMU cleanly (SIGTERM: it flushes its disks and exits)
// once the console shows the kernel halted: a board without ACPI
// (Config.NoACPI) cannot power off, and a guest that asks to anyway
// (an nvinit that does not know nvboot.off=reset) would leave QEMU
// running for ever.
func endAtHalt(m *Machine) {
	if _, _, err := m.Expect(context.Background(), 0, func(s string) bool { return strings.Contains(s, haltedMarker) }); err == nil {
		m.cmd.Process.Signal(syscall.SIGTERM)
	}
}

func isPanic(s string) bool { return strings.Contains(s, panicMarker) }

// loaderPrefix starts every line ld-off2f prints: init's exit status 127
// after one is the loader's refusal, the line its reason.
const loaderPrefix = "ld-off2f: "

// findPanic is the panic on the console lines, nil when there is none; disks
// are the VM's, for the likely cause.
func findPanic(lines []Line, disks []Disk) *PanicError {
	for i, l := range lines {
		if isPanic(l.Text) {
			text := l.Text[strings.Index(l.Text, panicMarker):]
			return &PanicError{Line: text, Cause: panicCause(text, lines[:i], disks)}
		}
	}
	return nil
}

// panicCause guesses why the kernel panicked from the panic line and the
// console lines before it; disks are the VM's, the first holding the root.
func panicCause(line string, before []Line, disks []Disk) string {
	earlier := func(s string) bool {
		for _, l := range before {
			if strings.Contains(l.Text, s) {
				return true
			}
		}
		return false
	}
	// The OFF2F loader's last word, when init is an OFF2F program it could
	// not load (both copies of its text gone or damaged, say).
	loader := ""
	for _, l := range before {
		if i := strings.Index(l.Text, loaderPrefix); i >= 0 {
			loader = l.Text[i:]
		}
	}
	switch {
	case strings.Contains(line, "Unable to mount root fs") || strings.Contains(line, "Cannot open root device") ||
		earlier("Cannot open root device") || earlier("Please append a correct \"root=\""):
		disk := "the disk image"
		if len(disks) > 0 {
			disk = disks[0].Path
		}
		return fmt.Sprintf("the kernel could not mount its root filesystem: is %s truncated or damaged (no partition table, or no root partition in it)? "+
			"Check it against its partition table (sgdisk -v), or rebuild it", disk)
	case strings.Contains(line, "No working init found") || strings.Contains(line, "Requested init") && strings.Contains(line, "failed"):
		return "the kernel could not run init: the root filesystem (or initramfs) lacks it, or it is not an executable for this machine"
	case strings.Contains(line, "Attempted to kill init") && loader != "" && strings.Contains(line, "exitcode=0x00007f00"):
		return "the OFF2F loader could not load init (PID 1): " + loader
	case strings.Contains(line, "Attempted to kill init"):
		return "init (PID 1) exited or crashed: the console lines before the panic say why"
	case strings.Contains(line, "Out of memory") || strings.Contains(line, "System is deadlocked on memory"):
		return "the guest ran out of memory: give it more (-mem)"
	}
	return "see the console lines before the panic"
}
