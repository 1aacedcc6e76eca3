package vm

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/format/bootmark"
)

// Config describes one virtual machine.
type Config struct {
	// Arch is the board: ArchX86_64 ("" too), QEMU's pc machine, or
	// ArchArm64, QEMU's virt machine (arm64.go).
	Arch string
	// Board is the x86-64 machine: BoardPC ("" too), QEMU's pc, or
	// BoardMicrovm, QEMU's microvm (microvm.go). The arm64 board is Arch's.
	Board   string
	QEMU    string // the QEMU binary; default qemu-system-x86_64 (arm64: qemu-system-aarch64)
	Kernel  string // bzImage (arm64: Image) to boot directly (-kernel); required unless BootDisk
	Initrd  string // initramfs, optional
	Cmdline string // kernel command line after the console settings vm adds
	MemMiB  int    // RAM; default 256
	CPUs    int    // default 1
	Accel   string // "kvm" or "tcg"; "" picks KVM when usable, else TCG
	// CPURate, when set, runs the device clock (ClockDevice): TCG counting
	// CPURate guest instructions per second of guest time (see ICountShift).
	// 0 is the wall clock.
	CPURate int64
	// Deterministic, with CPURate, makes every boot of the same machine the
	// same boot, whatever the host does: idle time jumps to the guest's next
	// timer (-icount sleep=off), random numbers and the calendar come from
	// fixed seeds, and there is no virtio-rng. Only for a guest that waits
	// for nothing of the host's: a virtio disk's I/O or QEMU's throttle
	// would end at a timer the host does not choose (appliance boots read
	// their disk from pmem for this: appliance.BootOptions.DiskAsPmem).
	Deterministic bool
	Disks         []Disk
	NVDIMMs       []NVDIMM
	// Forwards are host TCP ports forwarded to the guest (user networking,
	// virtio-net). Empty: the guest has no network device.
	Forwards []Forward
	// Console, when set, gets a copy of everything the guest prints on its
	// serial console, as it arrives.
	Console io.Writer
	// Stdin, when set, is fed to the serial console (nvboot run's terminal).
	Stdin io.Reader
	// PmemAs is how the NVDIMMs reach the guest: PmemE820 or PmemNVDIMM
	// (the default); on arm64 PmemDeviceTree (the default), or PmemNVDIMM
	// with UEFI firmware, which describes the board by ACPI.
	PmemAs string
	Extra  []string // more QEMU arguments, appended last
	// Firmware is the firmware image QEMU runs at power-on (-bios, e.g.
	// OVMF). "": qboot where it is installed and the kernel is booted
	// directly (it hands over to a -kernel in 0.4-0.6 ms of guest time at
	// 1 GIPS, SeaBIOS in 5.6-7 ms), else QEMU's default (SeaBIOS), which
	// is also the default for virtio-pmem without ACPI (pciINTx).
	// "seabios": QEMU's default. On arm64 only UEFI firmware, and only
	// to boot the disk (BootDisk; "" is then AAVMFCode).
	Firmware string
	// BootDisk boots the machine as a board boots: no -kernel, the
	// firmware loads what the disks hold (UEFI firmware: the first disk's
	// EFI/BOOT/BOOTX64.EFI, on arm64 BOOTAA64.EFI). Kernel, Initrd and Cmdline stay empty, and vm
	// adds no console settings: the command line is the disk's.
	BootDisk bool
	// NoACPI gives the board no ACPI tables (-machine acpi=off), as on an
	// embedded board whose devices are all described otherwise: the pmem
	// as e820 regions (PmemE820), the CPU and interrupt routing by the
	// firmware's MP table. The kernel then skips its ACPI interpreter (17
	// ms of a 1-GIPS boot), but cannot power the machine off: the guest
	// ends it with a reset, which -no-reboot turns into QEMU's exit.
	// NVDIMMs (found through ACPI's NFIT) and BootDisk (UEFI) need ACPI.
	NoACPI bool
	// FirmwareVars, with Firmware a UEFI code image (OVMFCode, AAVMFCode),
	// runs the firmware from two flash chips as a board holds it: Firmware
	// read-only, FirmwareVars (a copy of OVMFVars or AAVMFVars: NewFirmwareVars) the
	// writable variable store, where BootOrder, BootNext and the Boot####
	// entries persist from boot to boot. "": Firmware is one -bios image.
	FirmwareVars string
	// Watchdog gives the board an i6300esb watchdog (/dev/watchdog): a
	// guest that opens it and stops petting it is reset.
	Watchdog bool
	// Reboot keeps QEMU running through a guest reset (a reboot, the
	// watchdog, a panic with panic=N): the board starts again, firmware
	// first, with its disks, pmem and variable store as they are, as a
	// board does after a reset. Only a power-off (or Kill) ends QEMU. A
	// panic then ends QEMU only when the kernel stops there rather than
	// rebooting. Without Reboot every reset ends QEMU (-no-reboot): the
	// end of a boot that tests and measures wait for. Not with NoACPI,
	// whose power-off is a reset.
	Reboot bool
	// TCGCacheMiB caps TCG's translation cache (-accel tcg,tb-size=N):
	// 0 is QEMU's default, which grew to 94 MiB in the big appliance's
	// boot (kv's: 56), the emulator's memory, not the guest's, paid again
	// by every guest. Smaller makes TCG translate code again after each flush of
	// the full cache: slower on the wall clock, the same on the device
	// clock, which counts guest instructions. Not used under KVM.
	TCGCacheMiB int
	// FreePageReporting gives the board a virtio-balloon device with free
	// page reporting: the guest's kernel reports the free memory it has
	// (in 2 MiB blocks) and QEMU gives those pages back to the host, so a
	// guest costs the host what it uses, not every page it ever touched
	// (the kernel's decompression, freed init memory and heap). x86-64
	// only: the arm64 kernel has no virtio-balloon.
	FreePageReporting bool
	// SmallPageRAM backs the guest's RAM with 4 KiB pages (a memfd) over
	// the transparent huge pages QEMU asks for its anonymous RAM: with
	// those a guest that touches one page of a 2 MiB range costs the host
	// the whole range, and the pages free page reporting gives back are
	// only whole free 2 MiB blocks (while the host's shmem_enabled is
	// never, its default, or deny). The pc board only.
	SmallPageRAM bool
}

// Disk is a virtio block device (vda, vdb, ... in order).
type Disk struct {
	Path     string
	Storage  Storage // speed model; zero value: unthrottled
	ReadOnly bool
}

// NVDIMM is an emulated NVDIMM backed by a file (pmem0, pmem1, ... in order).
// The guest sees it as one label-less namespace covering the whole file.
type NVDIMM struct {
	Path string
	// Size of the DIMM; 0 means the file's size. The kernel adds pmem in
	// 2 MiB subsections, so keep it a multiple of 2 MiB.
	Size int64
	// ReadOnly gives the guest a device it cannot write, so that many
	// guests can map one file (readonly.go): QEMU opens the file
	// read-only and maps it as ROM, and the NVDIMM is unarmed, for which
	// the kernel makes its region and /dev/pmemN read-only. NVDIMMs only
	// (PmemNVDIMM): an e820 region or a device-tree one has no way to say so.
	ReadOnly bool
}

// repeats says the machine runs on the deterministic device clock: every
// boot of it the same boot (Deterministic, which needs a CPURate).
func (c Config) repeats() bool { return c.CPURate != 0 && c.Deterministic }

// Forward forwards host TCP port Host to guest port Guest.
type Forward struct{ Host, Guest int }

// Line is one line of serial console output and when it arrived, measured
// from the start of QEMU (power-on).
type Line struct {
	At   time.Duration
	Text string
}

// Machine is a running (or finished) QEMU.
type Machine struct {
	cmd   *exec.Cmd
	Start time.Time // when QEMU was started: power-on
	Accel string    // the accelerator in use
	Args  []string  // the QEMU command line

	mu      sync.Mutex
	lines   []Line
	partial []byte
	changed chan struct{} // closed and replaced on each new line and at exit
	exited  bool
	waitErr error
	// panicFrom is the first console line a panic that ended QEMU can be
	// on: past every panic the guest rebooted from (Config.Reboot).
	panicFrom int
	done      chan struct{}
}

// ErrExited is returned by Expect when QEMU ended before the line came.
var ErrExited = errors.New("vm: QEMU exited")

// Args returns the QEMU command line for c (without the binary).
func (c Config) args(accel string) ([]string, error) {
	if c.TCGCacheMiB < 0 {
		return nil, fmt.Errorf("vm: a TCG translation cache of %d MiB: want 0 (QEMU's default) or more", c.TCGCacheMiB)
	}
	switch c.Arch {
	case "", ArchX86_64:
	case ArchArm64:
		if c.Board != "" {
			return nil, fmt.Errorf("vm: board %q is an x86-64 machine: the arm64 board is QEMU's virt", c.Board)
		}
		return c.argsArm64(accel)
	default:
		return nil, fmt.Errorf("vm: arch %q: want %s or %s", c.Arch, ArchX86_64, ArchArm64)
	}
	switch c.Board {
	case "", BoardPC:
	case BoardMicrovm:
		return c.argsMicrovm(accel)
	default:
		return nil, fmt.Errorf("vm: board %q: want %s or %s", c.Board, BoardPC, BoardMicrovm)
	}
	mem := c.MemMiB
	if mem == 0 {
		mem = 256
	}
	cpus := c.CPUs
	if cpus == 0 {
		cpus = 1
	}
	// No System Management Mode and no VMware backdoor port: an appliance
	// board has neither, and the kernel probes both (1.5 ms of a 1-GIPS boot).
	machine := "pc,smm=off,vmport=off"
	pm, err := c.pmemArgs(mem)
	if err != nil {
		return nil, err
	}
	machine += pm.machine
	if c.NoACPI {
		if (c.PmemAs == "" || c.PmemAs == PmemNVDIMM) && len(c.NVDIMMs) > 0 {
			return nil, fmt.Errorf("vm: NoACPI with pmem as %q: the kernel finds NVDIMMs through ACPI's NFIT (use PmemE820 or PmemVirtio)", cmp.Or(c.PmemAs, PmemNVDIMM))
		}
		if c.BootDisk {
			return nil, fmt.Errorf("vm: NoACPI with BootDisk: UEFI firmware boots a board with ACPI")
		}
		if c.Reboot {
			return nil, fmt.Errorf("vm: NoACPI with Reboot: a board without ACPI powers off by a reset, which Reboot would make a new boot")
		}
		machine += ",acpi=off"
	}
	boot, err := c.bootArgs(accel, pm.cmdline)
	if err != nil {
		return nil, err
	}
	a := []string{
		"-machine", machine, "-accel", c.accelArg(accel), "-cpu", c.cpuModel(accel), "-smp", fmt.Sprint(cpus),
	}
	a, err = c.clockArgs(a, accel)
	if err != nil {
		return nil, err
	}
	a = c.commonArgs(a)
	if !c.NoACPI {
		// No PCI hotplug on an appliance board: without it the DSDT loses
		// the per-slot hotplug methods, and the kernel's ACPI init (AML
		// parsing and PCI enumeration, the biggest initcall) takes about
		// 40 % less time. Without ACPI QEMU warns that they are unused.
		a = append(a, "-global", "PIIX4_PM.acpi-pci-hotplug-with-bridge-support=off",
			"-global", "PIIX4_PM.acpi-root-pci-hotplug=off")
	}
	a = append(a, boot...)
	a = append(a, pm.args...)
	return c.deviceArgs(a)
}

// accelArg is -accel's value: accel, with TCG's cache size when one is set.
func (c Config) accelArg(accel string) string {
	if accel == "tcg" && c.TCGCacheMiB > 0 {
		return fmt.Sprintf("tcg,tb-size=%d", c.TCGCacheMiB)
	}
	return accel
}

// clockArgs appends the device clock's arguments (c.CPURate) to a: the
// same on every board.
func (c Config) clockArgs(a []string, accel string) ([]string, error) {
	if c.CPURate == 0 {
		return a, nil
	}
	if accel != "tcg" {
		return nil, fmt.Errorf("vm: the device clock (a CPU rate) needs -accel tcg: KVM runs at the host's speed, not at a counted rate")
	}
	shift, err := ICountShift(c.CPURate)
	if err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	if !c.Deterministic {
		// sleep=on: an idle guest's time passes as the host's, so a
		// wait on a host file's I/O or QEMU's throttle counts.
		return append(a, "-icount", fmt.Sprintf("shift=%d,sleep=on", shift)), nil
	}
	// sleep=off: when the guest idles, its clock jumps to its next
	// timer, so idle waits cost their nominal time whatever the
	// host does. -seed: its random numbers (RDRAND; on arm64 the device
	// tree's rng-seed) from a fixed seed, so Go's map seeds, the kernel's
	// address layout and every path they choose repeat. -rtc: the
	// calendar on the same clock from a fixed instant (DeviceEpoch): on
	// the host's, the kernel's RTC reads (the update-in-progress wait, the
	// wall time mixed into its CRNG) would differ from boot to boot.
	return append(a, "-icount", fmt.Sprintf("shift=%d,sleep=off", shift), "-seed", "1",
		"-rtc", "base="+DeviceEpoch.Format("2006-01-02T15:04:05")+",clock=vm"), nil
}

// commonArgs appends what every board has: no default devices, no
// display or monitor, the serial console on QEMU's stdio, the reset
// behaviour and the watchdog.
func (c Config) commonArgs(a []string) []string {
	a = append(a, "-nodefaults", "-no-user-config", "-display", "none", "-monitor", "none")
	if !c.Reboot {
		a = append(a, "-no-reboot") // the guest's reboot ends QEMU: tests and power-off both end that way
	}
	a = append(a, "-chardev", "stdio,id=con,signal=off", "-serial", "chardev:con")
	if c.Watchdog {
		a = append(a, "-device", "i6300esb")
	}
	return a
}

// deviceArgs appends the virtio devices every board has the same way
// (disks, network, entropy; on PCI, or on microvm's virtio-mmio) and
// c.Extra.
func (c Config) deviceArgs(a []string) ([]string, error) {
	for i, d := range c.Disks {
		if _, err := os.Stat(d.Path); err != nil {
			return nil, fmt.Errorf("vm: disk %d: %w", i, err)
		}
		opt := fmt.Sprintf("file=%s,if=none,id=d%d,format=raw", d.Path, i)
		if d.ReadOnly {
			opt += ",readonly=on"
		}
		if t := d.Storage.throttle(); t != "" {
			opt += "," + t
		}
		a = append(a, "-drive", opt, "-device", fmt.Sprintf("%s,drive=d%d", c.virtioDevice("virtio-blk"), i))
	}
	if len(c.Forwards) > 0 {
		net := "user,id=n0"
		if c.repeats() {
			// QEMU's user network sends IPv6 router advertisements at
			// intervals it draws at random: each would land at a
			// different point of the guest's clock.
			net += ",ipv6=off"
		}
		for _, f := range c.Forwards {
			net += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", f.Host, f.Guest)
		}
		dev := c.virtioDevice("virtio-net") + ",netdev=n0"
		if c.repeats() && c.Board != BoardMicrovm { // microvm's: argsMicrovm
			// The guest's notifications handled at once, on its own clock:
			// through an eventfd they wait for QEMU's main loop, and the
			// driver spins on its control queue until they are done (the
			// interface's rx mode at link up) for as long as the host takes.
			dev += ",ioeventfd=off"
		}
		a = append(a, "-netdev", net, "-device", dev)
	}
	if c.FreePageReporting {
		a = append(a, "-device", c.virtioDevice("virtio-balloon")+",free-page-reporting=on")
	}
	if !c.repeats() {
		// The guest's entropy: Go's runtime wants getrandom early. Not on
		// a deterministic device clock, where the kernel trusts RDRAND instead
		// (machineCmdline): virtio-rng answers from QEMU's main loop, at
		// an instant of the host's choosing, and each answer would land
		// at a different point of the guest's clock from boot to boot.
		a = append(a, "-device", c.virtioDevice("virtio-rng"))
	}
	return append(a, c.Extra...), nil
}

// machineCmdline is what the kernel needs to know about the emulated
// machine. Under TCG the local APIC has no TSC-deadline mode, so the kernel
// would calibrate the APIC timer against the PIT: 100 ms of busy waiting
// (HZ/10 ticks) that no CPU with a TSC-deadline timer, every x86 core of
// the last decade, spends. noapictimer skips it; with one CPU the HPET
// serves as the clock event device instead.
//
// Under the device clock the TSC counts guest nanoseconds (QEMU's virtual
// clock), whatever the rate: tsc_early_khz says so, as a board's CPUID or
// firmware would, instead of a calibration against the PIT.
//
// A board without ACPI tables (NoACPI) says so with acpi=off: the kernel
// would otherwise search for them and print an error that none are there.
func machineCmdline(accel string, c Config) string {
	s := ""
	if c.NoACPI {
		s += "acpi=off "
	}
	if accel == "tcg" && (c.Board != BoardMicrovm || c.NoACPI) {
		// Not on microvm with ACPI: the APIC timer is its one clock event
		// device (argsMicrovm).
		s += "noapictimer "
	}
	if c.CPURate != 0 {
		s += "tsc_early_khz=1000000 "
		if c.Deterministic {
			// The CRNG seeded from RDRAND at once (QEMU's, from -seed)
			// rather than from virtio-rng, whose answers QEMU delivers
			// from its main loop at a host time (see args).
			s += "random.trust_cpu=on "
		}
	}
	return s
}

func cpuModel(accel string) string {
	if accel == "kvm" {
		return "host"
	}
	return "max" // TCG: every feature it emulates (CLWB, CLFLUSHOPT for pheap)
}

// cpuModel is the -cpu of c's board. On the device clock the fast string
// features are off: -icount charges a REP MOVSB or STOSB one instruction
// per byte, where a core with ERMS moves a cache line or more a cycle, so
// the kernel's memset and memcpy (which pick REP MOVSB/STOSB when ERMS or
// FSRM is set) would cost 8 times what REP MOVSQ/STOSQ costs the model.
func (c Config) cpuModel(accel string) string {
	m := cpuModel(accel)
	if c.CPURate != 0 && accel == "tcg" {
		m += ",erms=off,fsrm=off"
	}
	return m
}

// Start powers the machine on.
func Start(ctx context.Context, c Config) (*Machine, error) {
	qemu := c.qemu()
	accel := c.Accel
	if accel == "" && (c.CPURate != 0 || c.Arch == ArchArm64) {
		// The instruction counter exists only under TCG, and an arm64
		// board on this x86 host has nothing else.
		accel = "tcg"
	}
	if accel == "" {
		var err error
		if accel, _, err = ChooseAccel(qemu); err != nil {
			return nil, fmt.Errorf("vm: %w", err)
		}
	}
	args, err := c.args(accel)
	if err != nil {
		return nil, err
	}
	// The arm64 board's device tree: QEMU's for this machine, compacted,
	// its pmem regions added (arm64.go). Not with UEFI firmware, which
	// gives the kernel ACPI tables instead.
	var tmp string
	if c.Arch == ArchArm64 && !c.uefiArm64() {
		if tmp, err = os.MkdirTemp("", "nvboot-dtb-"); err != nil {
			return nil, fmt.Errorf("vm: %w", err)
		}
		dtb, err := c.boardDTB(ctx, qemu, args, tmp)
		if err != nil {
			os.RemoveAll(tmp)
			return nil, err
		}
		args = append(args, "-dtb", dtb)
	}
	cmd := exec.CommandContext(ctx, qemu, args...)
	cmd.Cancel = func() error { return cmd.Process.Kill() }
	// Never outlive the test or tool (Pdeathsig). A process group of its
	// own: Ctrl-C in a terminal signals the whole foreground group, and
	// QEMU ends at once on SIGINT, a power cut; the tool that started it
	// decides what Ctrl-C does (nvboot run: a clean power-off).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if c.Stdin != nil {
		// Through a pipe we feed ourselves: with cmd.Stdin set to a reader,
		// Wait would wait for that reader's EOF even after QEMU exited.
		w, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		go func() { io.Copy(w, c.Stdin); w.Close() }()
	}
	m := &Machine{cmd: cmd, Accel: accel, Args: append([]string{qemu}, args...),
		changed: make(chan struct{}), done: make(chan struct{})}
	m.Start = time.Now()
	if err := cmd.Start(); err != nil {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		return nil, fmt.Errorf("vm: starting %s: %w", qemu, err)
	}
	go stopAtPanic(m, c.Reboot)
	if c.NoACPI {
		go endAtHalt(m)
	}
	go func() {
		m.read(out, c.Console)
		err := cmd.Wait()
		m.mu.Lock()
		from := m.panicFrom
		m.mu.Unlock()
		if p := findPanic(m.Lines()[from:], c.Disks); p != nil {
			err = p // QEMU itself was stopped, or powered off after it
		} else if err != nil && stderr.Len() > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		m.mu.Lock()
		m.exited, m.waitErr = true, err
		close(m.changed)
		m.mu.Unlock()
		close(m.done)
	}()
	return m, nil
}

// read splits the console into lines, stamping each on arrival.
func (m *Machine) read(r io.Reader, copyTo io.Writer) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 && copyTo != nil {
			copyTo.Write(b)
		}
		m.mu.Lock()
		m.partial = append(m.partial, b...)
		if n := len(m.partial); n > 0 && m.partial[n-1] == '\n' {
			text := strings.TrimRight(string(m.partial), "\r\n")
			m.lines = append(m.lines, Line{At: time.Since(m.Start), Text: text})
			m.partial = m.partial[:0]
			close(m.changed)
			m.changed = make(chan struct{})
		}
		m.mu.Unlock()
		if err != nil {
			m.mu.Lock()
			if len(m.partial) > 0 { // the last line, cut off by the power cut
				m.lines = append(m.lines, Line{At: time.Since(m.Start), Text: strings.TrimRight(string(m.partial), "\r\n")})
				m.partial = nil
			}
			m.mu.Unlock()
			return
		}
	}
}

// Expect waits for a console line for which match returns true, looking at
// lines from index from on, and returns it with its index. It fails with
// ErrExited if QEMU ends first, or with ctx's error.
func (m *Machine) Expect(ctx context.Context, from int, match func(string) bool) (Line, int, error) {
	for {
		m.mu.Lock()
		for i := from; i < len(m.lines); i++ {
			if match(m.lines[i].Text) {
				l := m.lines[i]
				m.mu.Unlock()
				return l, i, nil
			}
		}
		from = max(from, len(m.lines))
		exited, ch := m.exited, m.changed
		m.mu.Unlock()
		if exited {
			return Line{}, 0, fmt.Errorf("%w before a matching line: %v", ErrExited, m.waitErr)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return Line{}, 0, fmt.Errorf("vm: waiting for console output: %w", ctx.Err())
		}
	}
}

// ExpectString waits for a line containing s.
func (m *Machine) ExpectString(ctx context.Context, s string) (Line, error) {
	l, _, err := m.Expect(ctx, 0, func(t string) bool { return strings.Contains(t, s) })
	return l, err
}

// Lines returns the console lines so far.
func (m *Machine) Lines() []Line {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Line(nil), m.lines...)
}

// Marks returns the boot marks (format/bootmark) among the console lines
// so far, each with when its line arrived.
func (m *Machine) Marks() []bootmark.Stamped {
	var marks []bootmark.Stamped
	for _, l := range m.Lines() {
		if mk, ok := bootmark.Parse(l.Text); ok {
			marks = append(marks, bootmark.Stamped{At: l.At, Mark: mk})
		}
	}
	return marks
}

// Console returns the console output so far as text.
func (m *Machine) Console() string {
	var b strings.Builder
	for _, l := range m.Lines() {
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// Kill cuts the power: SIGKILL to QEMU, nothing flushed, then waits for it.
func (m *Machine) Kill() {
	m.cmd.Process.Kill()
	<-m.done
}

// Wait waits for QEMU to end (the guest powered off or rebooted) and returns
// its exit error, if any.
func (m *Machine) Wait(ctx context.Context) error {
	select {
	case <-m.done:
		return m.waitErr
	case <-ctx.Done():
		return fmt.Errorf("vm: waiting for the guest to power off: %w", ctx.Err())
	}
}

// Done is closed when QEMU has ended.
func (m *Machine) Done() <-chan struct{} { return m.done }

// Pid is QEMU's process id: where its memory is read (/proc/PID/smaps).
func (m *Machine) Pid() int { return m.cmd.Process.Pid }

// FreePort returns a TCP port free on the host's 127.0.0.1 now, to forward a
// guest port from (Forward.Host). Another process may take it before QEMU
// binds it; QEMU then fails to start, saying so.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("vm: finding a free host port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
