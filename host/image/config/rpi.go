package config

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
