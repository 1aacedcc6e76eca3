package config

import "fmt"

// The Raspberry Pi's parts, as gokrazy's config names them: Go packages
// whose directories hold the kernel and device trees, the firmware, and
// the EEPROM update files (host/image/rpi fetches them from the module
// proxy and writes the card's boot partitions).
const (
	DefaultKernelPackage   = "github.com/gokrazy/kernel.rpi"
	DefaultFirmwarePackage = "github.com/gokrazy/firmware"
	DefaultEEPROMPackage   = "github.com/gokrazy/rpi-eeprom"
	// DefaultSerialConsole is gokrazy's: the Pi firmware's name for the
	// UART on the GPIO header, which it rewrites on the kernel command
	// line to the board's device (ttyS0 on a Pi 3, ttyAMA0 on a Pi 4).
	DefaultSerialConsole = "serial0,115200"
)

// KernelPackageOrDefault is KernelPackage, gokrazy's kernel.rpi when unset.
func (g *Gokrazy) KernelPackageOrDefault() string {
	return orDefault(g.KernelPackage, DefaultKernelPackage)
}

// FirmwarePackageOrDefault is FirmwarePackage, gokrazy's firmware when
// unset; "": the boot partition gets no firmware from a package.
func (g *Gokrazy) FirmwarePackageOrDefault() string {
	return orDefault(g.FirmwarePackage, DefaultFirmwarePackage)
}

// EEPROMPackageOrDefault is EEPROMPackage, gokrazy's rpi-eeprom when unset;
// "" (gokrazy's way to turn it off): no EEPROM update files.
func (g *Gokrazy) EEPROMPackageOrDefault() string {
	return orDefault(g.EEPROMPackage, DefaultEEPROMPackage)
}

// SerialConsoleOrDefault is SerialConsole, "serial0,115200" when unset.
func (g *Gokrazy) SerialConsoleOrDefault() string {
	if g.SerialConsole == "" {
		return DefaultSerialConsole
	}
	return g.SerialConsole
}

func orDefault(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

// deviceTypeIgnored says what an image of t is instead of gokrazy's
// DeviceType board.
func deviceTypeIgnored(t Target) string {
	switch t {
	case TargetPC:
		return "nvboot builds one x86-64 image (UEFI disk, or a kernel QEMU boots directly)"
	case TargetVirt:
		return fmt.Sprintf("nvboot builds this image for %s (target %s): a UEFI disk, or a kernel QEMU boots directly", t.Board(), t)
	}
	return fmt.Sprintf("nvboot builds this image for %s (target %s), whatever the DeviceType", t.Board(), t)
}

// partsIgnored are IgnoredFor's warnings about the board's parts: what
// gokrazy's Pi parts and SerialConsole ask that an image of t does not
// do. amd64-pc's are worded for its x86-64 board, arm64-virt's for its
// arm64 UEFI board; a Raspberry Pi image applies the Pi's parts, so it
// warns only of BootloaderExtraEEPROM and a SerialConsole that leaves the
// UART without nvboot's marks.
func (c *Config) partsIgnored(t Target) []string {
	var w []string
	warn := func(format string, args ...any) { w = append(w, fmt.Sprintf(format, args...)) }
	switch t {
	case TargetRPi:
		if len(c.BootloaderExtraEEPROM) > 0 {
			warn("BootloaderExtraEEPROM: not applied: the card's EEPROM update files keep the release's bootconf.txt (nvboot writes no EEPROM settings of its own)")
		}
		switch sc := c.SerialConsole; sc {
		case "disabled":
			warn("SerialConsole %q: the Pi's UART (serial0) stays on without a console, so the kernel's log and nvinit's boot marks go to the HDMI console (tty1) only", sc)
		case "off":
			warn("SerialConsole %q: the Pi's UART is turned off (enable_uart=0), so the kernel's log and nvinit's boot marks go to the HDMI console (tty1) only", sc)
		}
		return w
	case TargetVirt:
		// The arm64 board with UEFI (QEMU's virt): its own kernel, its
		// PL011 as the console.
		if p := c.KernelPackage; p != nil && *p != "" {
			warn("KernelPackage %q: an %s image boots nvboot's own arm64 kernel (kernel-config/, or KernelPath)", *p, t)
		}
		if p := c.FirmwarePackage; p != nil && *p != "" {
			warn("FirmwarePackage %q: Raspberry Pi firmware; an %s image boots through UEFI, or QEMU loads its kernel", *p, t)
		}
		if p := c.EEPROMPackage; p != nil && *p != "" {
			warn("EEPROMPackage %q: Raspberry Pi EEPROM; an arm64 board with UEFI has none to update", *p)
		}
		if len(c.BootloaderExtraLines) > 0 {
			warn("BootloaderExtraLines: lines for the Raspberry Pi's config.txt; an %s image has no such file (kernel arguments go in KernelExtraArgs)", t)
		}
		if len(c.BootloaderExtraEEPROM) > 0 {
			warn("BootloaderExtraEEPROM: the Raspberry Pi EEPROM's bootconf.txt; an arm64 board with UEFI has none")
		}
		switch c.SerialConsole {
		case "disabled", "off":
			warn("SerialConsole %q: nvboot keeps the serial console on ttyAMA0 (the board's PL011): its boot markers, nvboot run and measure read it", c.SerialConsole)
		}
		return w
	}
	if p := c.KernelPackage; p != nil && *p != "" {
		warn("KernelPackage %q: nvboot boots its own x86-64 kernel (kernel-config/, or KernelPath)", *p)
	}
	if p := c.FirmwarePackage; p != nil && *p != "" {
		warn("FirmwarePackage %q: Raspberry Pi firmware; an nvboot image boots through UEFI, or QEMU loads its kernel", *p)
	}
	if p := c.EEPROMPackage; p != nil && *p != "" {
		warn("EEPROMPackage %q: Raspberry Pi EEPROM; an x86-64 board has none to update", *p)
	}
	if len(c.BootloaderExtraLines) > 0 {
		warn("BootloaderExtraLines: lines for the Raspberry Pi's config.txt; an nvboot image has no such file (kernel arguments go in KernelExtraArgs)")
	}
	if len(c.BootloaderExtraEEPROM) > 0 {
		warn("BootloaderExtraEEPROM: the Raspberry Pi EEPROM's bootconf.txt; an x86-64 board has none")
	}
	switch c.SerialConsole {
	case "disabled", "off":
		warn("SerialConsole %q: nvboot keeps the serial console on ttyS0: its boot markers, nvboot run and measure read it", c.SerialConsole)
	}
	return w
}
