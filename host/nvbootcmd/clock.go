package nvbootcmd

import (
	"errors"
	"flag"
	"math"
	"strconv"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/measure"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/cli"
)

// machineFlags choose how the guest runs (a measure.Machine): -accel,
// -clock, -cpu-rate, -board, -pmem, -append and -mem.
type machineFlags struct {
	fs       *flag.FlagSet
	accel    *string
	clock    *string
	rate     *rateFlag
	board    *string
	pmem     *string
	append   *string
	mem      *int
	defClock string // "" picks: the device clock unless KVM really works
}

const clockHelp = `Clocks: -clock device runs QEMU under TCG with its instruction counter
(-icount shift=N,sleep=off): every guest instruction takes 1/-cpu-rate s of
guest time (default 1e9: a 1-GIPS in-order core), and when the guest idles
its clock jumps to its next timer. Everything it waits for is on that clock
too: the storage model is io.max inside the guest on a disk read from pmem,
the first request is the guest's own, its random numbers come from a fixed
seed. Every stage is then read from the guest's own clock, power-on
included, and comes out the same on any host, however slow or busy: a
device's boot time, not the emulator's. -clock wall times the boot with the
host's clock: faithful only where the guest runs at hardware speed (KVM).`

func addMachineFlags(fs *flag.FlagSet, defClock string) *machineFlags {
	f := &machineFlags{fs: fs, defClock: defClock}
	f.accel = fs.String("accel", "", "kvm or tcg; empty: $NVBOOT_ACCEL, else KVM when it really works here")
	what := "empty: wall on KVM, device otherwise"
	if defClock != "" {
		what = "default " + defClock
	}
	f.clock = fs.String("clock", defClock, "`device` (guest instructions counted as time) or wall (the host's clock); "+what)
	f.rate = &rateFlag{vm.DefaultCPURate}
	f.pmem = fs.String("pmem", appliance.DefaultPmemAs, "how the pmem images reach the guest: `e820` (RAM the firmware says is persistent), nvdimm (emulated NVDIMMs, ACPI NFIT) or virtio (virtio-pmem-pci devices: no MAP_SYNC, writes made durable by the device's flush request)")
	f.board = fs.String("board", vm.BoardPC, "the x86-64 machine: `pc` (QEMU's pc) or microvm (QEMU's microvm: virtio-mmio, no PCI devices, pmem as e820 only, the device clock under TCG)")
	f.append = fs.String("append", "", "append `ARGS` to the image's kernel command line (e.g. initcall_debug ignore_loglevel): to try a change to the boot")
	f.mem = fs.Int("mem", appliance.DefaultMemMiB, "guest RAM in `MiB` (at least 64, at most the host's)")
	fs.Var(f.rate, "cpu-rate", "device clock: guest instructions per `second`, 1e9 divided by a power of two (1e9, 5e8, 2.5e8, ...)")
	return f
}

// resolve checks the flags (and KVM, when asked for) before anything starts.
func (f *machineFlags) resolve() (measure.Machine, error) {
	m, err := f.resolveClock()
	if err != nil {
		return m, err
	}
	if err := checkMem(*f.mem); err != nil {
		return measure.Machine{}, err
	}
	m.Append, m.MemMiB = *f.append, *f.mem
	switch *f.pmem {
	case vm.PmemE820, vm.PmemNVDIMM, vm.PmemVirtio:
		m.PmemAs = *f.pmem
	default:
		return measure.Machine{}, cli.Usagef("-pmem %q: want e820, nvdimm or virtio", *f.pmem)
	}
	switch *f.board {
	case vm.BoardPC:
	case vm.BoardMicrovm:
		if m.PmemAs != vm.PmemE820 {
			return measure.Machine{}, cli.Usagef("-pmem %s with -board microvm: QEMU's microvm has no device-memory area, so it maps an NVDIMM or a virtio-pmem device nowhere in the guest (it accepts them, and the guest finds no pmem); its pmem is -pmem e820", m.PmemAs)
		}
	default:
		return measure.Machine{}, cli.Usagef("-board %q: want pc or microvm", *f.board)
	}
	m.Board = *f.board
	return m, nil
}

func (f *machineFlags) resolveClock() (measure.Machine, error) {
	if *f.clock == vm.ClockDevice && *f.accel == "kvm" {
		return measure.Machine{}, cli.Usagef("-clock device with -accel kvm: the device clock is QEMU's instruction counter, which only TCG has")
	}
	if err := checkAccel(*f.accel); err != nil {
		return measure.Machine{}, err
	}
	rateSet, clockSet := false, false
	f.fs.Visit(func(fl *flag.Flag) {
		rateSet = rateSet || fl.Name == "cpu-rate"
		clockSet = clockSet || fl.Name == "clock"
	})
	clock := *f.clock
	if *f.board == vm.BoardMicrovm && clock == vm.ClockWall && !f.kvm() {
		// The microvm board boots under TCG on the device clock only
		// (vm.BoardMicrovm): a wall-clock default gives way to it, a
		// -clock wall asked for is refused.
		if clockSet {
			return measure.Machine{}, cli.Usagef("-clock wall with -board microvm under TCG: microvm's hardware-reduced ACPI leaves the kernel no timer to calibrate the TSC against (no PIT, HPET or PM timer) and the boot stops there; use -clock device (or -accel kvm where KVM works)")
		}
		clock = ""
	}
	if clock == "" {
		accel := *f.accel
		if accel == "" {
			var err error
			if accel, _, err = vm.ChooseAccel("qemu-system-x86_64"); err != nil {
				return measure.Machine{}, err
			}
		}
		clock = vm.ClockDevice
		if accel == "kvm" && !rateSet {
			clock = vm.ClockWall
		}
	}
	switch clock {
	case vm.ClockWall:
		if rateSet {
			return measure.Machine{}, cli.Usagef("-cpu-rate is for -clock device: the wall clock runs at the host's speed")
		}
		return measure.Machine{Accel: *f.accel, Clock: vm.ClockWall}, nil
	case vm.ClockDevice:
		if *f.accel == "kvm" {
			return measure.Machine{}, cli.Usagef("-clock device with -accel kvm: the device clock is QEMU's instruction counter, which only TCG has")
		}
		if _, err := vm.ICountShift(f.rate.n); err != nil {
			return measure.Machine{}, cli.Usagef("-cpu-rate: %v", err)
		}
		return measure.Machine{Accel: "tcg", Clock: vm.ClockDevice, CPURate: f.rate.n}, nil
	}
	return measure.Machine{}, cli.Usagef("-clock %q: want device or wall", clock)
}

// kvm says whether the guest runs on KVM: -accel kvm, or no -accel and
// KVM really works here.
func (f *machineFlags) kvm() bool {
	if *f.accel != "" {
		return *f.accel == "kvm"
	}
	accel, _, err := vm.ChooseAccel("qemu-system-x86_64")
	return err == nil && accel == "kvm"
}

// rateFlag is an instruction rate written as an integer or in e-notation
// (5e8), as people write rates.
type rateFlag struct{ n int64 }

func (r *rateFlag) String() string {
	if r == nil {
		return ""
	}
	return strconv.FormatInt(r.n, 10)
}

func (r *rateFlag) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f > math.MaxInt64 {
		return errors.New("want a whole number of instructions per second, e.g. 1e9 or 500000000")
	}
	r.n = int64(f)
	return nil
}
