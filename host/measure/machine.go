package measure

import (
	"fmt"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/vm"
)

// Machine is how the guest runs: its accelerator, clock and memory.
type Machine struct {
	Accel   string // "" lets vm pick (NVBOOT_ACCEL, else KVM when it works)
	PmemAs  string // vm.PmemE820, vm.PmemNVDIMM or vm.PmemVirtio
	Board   string // vm.BoardPC or vm.BoardMicrovm; "": the pc board
	Clock   string // vm.ClockWall or vm.ClockDevice
	CPURate int64  // instructions per second of guest time; 0 on the wall clock
	Append  string // appended to the image's kernel command line
	MemMiB  int    // guest RAM
}

// BootOptions are what every boot of m on storage prof starts from.
func (m Machine) BootOptions(prof vm.Storage) appliance.BootOptions {
	o := appliance.BootOptions{Storage: prof, Accel: m.Accel, CPURate: m.CPURate, PmemAs: m.PmemAs,
		Board: m.Board, ExtraCmdline: m.Append, MemMiB: m.MemMiB}
	o.DiskAsPmem = appliance.StorageInGuest(o)
	return o
}

// String is the printout's description under accel (the accelerator the
// boots ran on), e.g. "device clock, a 1-GIPS in-order core (QEMU TCG -icount)".
func (m Machine) String(accel string) string {
	if m.Clock == vm.ClockDevice {
		return fmt.Sprintf("device clock, a %s in-order core (QEMU TCG -icount)", rateName(m.CPURate))
	}
	return fmt.Sprintf("wall clock (QEMU %s)", accel)
}

// rateName: 1000000000 -> "1-GIPS", 500000000 -> "500-MIPS".
func rateName(r int64) string {
	if r%1_000_000_000 == 0 {
		return fmt.Sprintf("%d-GIPS", r/1_000_000_000)
	}
	if r%1_000_000 == 0 {
		return fmt.Sprintf("%d-MIPS", r/1_000_000)
	}
	return fmt.Sprintf("%d-IPS", r)
}
