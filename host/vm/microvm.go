package vm

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The x86-64 boards (Config.Board).
const (
	// BoardPC is QEMU's pc machine: PCI, ACPI (unless NoACPI), every pmem
	// transport.
	BoardPC = "pc"
	// BoardMicrovm is QEMU's microvm machine, what a Firecracker guest
	// looks like: no PCI, its devices on virtio-mmio, its own firmware
	// (qboot's bios-microvm.bin) booting the kernel directly. Its pmem is
	// e820 regions only: it has no device-memory area, so QEMU accepts an
	// NVDIMM or a virtio-pmem-pci (even with pcie=on) or a virtio-pmem on
	// virtio-mmio, and maps it nowhere in the guest.
	BoardMicrovm = "microvm"
)

// argsMicrovm is the QEMU command line of the microvm board: QEMU's
// firmware for it handing over to -kernel, the console on the ISA serial
// port, disks, network and entropy on virtio-mmio, pmem as e820 regions.
//
// ACPI on (hardware-reduced: a DSDT of the virtio-mmio devices, a generic
// event device whose sleep register powers the board off, an MCFG) and
// pcie=on, an empty PCIe host bridge, because Linux 6.1 puts memmap=
// persistent ranges into its resource tree only from the PCI resource
// survey (pcibios_resource_survey, e820__reserve_resources_late; its
// Hyper-V code works around the same hole): with ACPI off, or on without
// the bridge, the kernel sees no PCI and no /dev/pmem0 appears (tried).
// The cost: hardware-reduced ACPI makes the kernel skip the PIT, and
// microvm has no HPET and no PM timer, so under TCG only the device
// clock's tsc_early_khz gives the kernel its TSC rate (on the wall clock
// it stops at "Marking TSC unstable"), and the local APIC timer is the one
// clock event device (no noapictimer). With NoACPI (no pmem then) the
// kernel finds the virtio-mmio devices on its command line
// (virtio_mmio.device=, which QEMU appends) and the CPU and interrupts in
// the firmware's MP table, and the board cannot power off, as the pc
// board without ACPI.
func (c Config) argsMicrovm(accel string) ([]string, error) {
	switch {
	case c.BootDisk || c.FirmwareVars != "":
		return nil, errors.New("vm: the microvm board boots its kernel directly (-kernel): no UEFI firmware (BootDisk, FirmwareVars)")
	case c.Firmware != "":
		return nil, fmt.Errorf("vm: firmware %q on the microvm board: it runs its own (QEMU's bios-microvm.bin, qboot's), which boots -kernel", c.Firmware)
	case c.Watchdog:
		return nil, errors.New("vm: Watchdog on the microvm board: the i6300esb is a PCI device, and microvm has no PCI")
	case c.SmallPageRAM:
		return nil, errors.New("vm: SmallPageRAM on the microvm board: the pc board's only")
	case c.Reboot && c.NoACPI:
		return nil, errors.New("vm: NoACPI with Reboot: a board without ACPI powers off by a reset, which Reboot would make a new boot")
	case c.Kernel == "":
		return nil, errors.New("vm: no kernel (set NVBOOT_KERNEL or run make kernel)")
	case !c.NoACPI && accel == "tcg" && c.CPURate == 0:
		return nil, errors.New("vm: the microvm board under TCG runs on the device clock (a CPU rate): its hardware-reduced ACPI leaves the kernel no timer to calibrate the TSC against (no PIT, HPET or PM timer), and the boot stops there")
	case c.NoACPI && len(c.NVDIMMs) > 0:
		return nil, errors.New("vm: NoACPI with pmem on the microvm board: without ACPI it has no PCI, and Linux registers memmap= pmem only from its PCI resource survey: no /dev/pmem would appear")
	}
	mem := cmp.Or(c.MemMiB, 256)
	var pm pmemSetup
	switch c.PmemAs {
	case PmemE820:
		sizes, err := c.nvdimmSizes()
		if err != nil {
			return nil, err
		}
		if len(sizes) > 0 {
			if pm, err = c.e820Args(mem, sizes); err != nil {
				return nil, err
			}
			break
		}
		pm.args = []string{"-m", fmt.Sprintf("%dM", mem)}
	case "", PmemNVDIMM, PmemVirtio:
		if len(c.NVDIMMs) > 0 {
			return nil, fmt.Errorf("vm: pmem as %s on the microvm board: microvm has no device-memory area, so QEMU accepts an NVDIMM or a virtio-pmem device and maps it nowhere in the guest (use PmemE820)", cmp.Or(c.PmemAs, PmemNVDIMM))
		}
		pm.args = []string{"-m", fmt.Sprintf("%dM", mem)}
	default:
		return nil, fmt.Errorf("vm: PmemAs %q on the microvm board: want %s", c.PmemAs, PmemE820)
	}
	machine := "microvm,isa-serial=on,pit=on,rtc=on"
	if c.NoACPI {
		machine += ",acpi=off,pcie=off"
	} else {
		machine += ",acpi=on,pcie=on"
	}
	a := []string{"-machine", machine, "-accel", c.accelArg(accel), "-cpu", c.cpuModel(accel), "-smp", strconv.Itoa(cmp.Or(c.CPUs, 1))}
	a, err := c.clockArgs(a, accel)
	if err != nil {
		return nil, err
	}
	a = c.commonArgs(a)
	a = append(a, "-kernel", c.Kernel, "-append", strings.TrimSpace("console=ttyS0 "+machineCmdline(accel, c)+pm.cmdline+c.Cmdline))
	if c.Initrd != "" {
		a = append(a, "-initrd", c.Initrd)
	}
	a = append(a, pm.args...)
	if c.repeats() {
		// As virtio-net-pci's ioeventfd=off (deviceArgs), on the mmio
		// transport, where the property is the transport's.
		a = append(a, "-global", "virtio-mmio.ioeventfd=off")
	}
	return c.deviceArgs(a)
}

// virtioDevice is the QEMU device name of a virtio device on c's board:
// on PCI (virtio-blk-pci) or, on microvm, on virtio-mmio
// (virtio-blk-device).
func (c Config) virtioDevice(dev string) string {
	if c.Board == BoardMicrovm {
		return dev + "-device"
	}
	return dev + "-pci"
}
