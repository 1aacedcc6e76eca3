package config

import (
	"slices"
	"strings"
	"testing"
)

// The warnings about a board's parts name the board the image is built
// for: a Raspberry Pi image applies KernelPackage, FirmwarePackage,
// EEPROMPackage and BootloaderExtraLines and reads SerialConsole as the Pi
// does (serial0, HDMI's tty1 when the UART has no console), so none of its
// warnings speaks of x86-64 or ttyS0; arm64-virt's speak of its own arm64
// kernel and ttyAMA0; amd64-pc's are as they were. -arch retargets them.
func TestIgnoredForTarget(t *testing.T) {
	c, _ := load(t, "testdata/gokrazy/everything/config.json")
	c.SerialConsole = "off"
	eeprom := DefaultEEPROMPackage
	c.EEPROMPackage = &eeprom
	has := func(w []string, s string) bool {
		return slices.ContainsFunc(w, func(x string) bool { return strings.Contains(x, s) })
	}
	pc, virt, pi := c.IgnoredFor(TargetPC), c.IgnoredFor(TargetVirt), c.IgnoredFor(TargetRPi)
	for _, want := range []string{"own x86-64 kernel", "an x86-64 board has none to update", `SerialConsole "off": nvboot keeps the serial console on ttyS0`} {
		if !has(pc, want) {
			t.Errorf("amd64-pc: no %q in %q", want, pc)
		}
	}
	for _, want := range []string{"own arm64 kernel", "an arm64 board with UEFI has none to update", "ttyAMA0", `DeviceType "odroidhc1": names a gokrazy board; nvboot builds this image for an arm64 board`} {
		if !has(virt, want) {
			t.Errorf("arm64-virt: no %q in %q", want, virt)
		}
	}
	for _, want := range []string{`DeviceType "odroidhc1": names a gokrazy board; nvboot builds this image for a Raspberry Pi`,
		"BootloaderExtraEEPROM: not applied", `SerialConsole "off": the Pi's UART is turned off (enable_uart=0)`, "GokrazyPackages", "Update.Hostname"} {
		if !has(pi, want) {
			t.Errorf("arm64-rpi: no %q in %q", want, pi)
		}
	}
	for _, part := range []string{"KernelPackage", "FirmwarePackage", "EEPROMPackage", "BootloaderExtraLines"} {
		if has(pi, part+" ") || has(pi, part+":") {
			t.Errorf("arm64-rpi warns of %s, which a Pi image applies: %q", part, pi)
		}
	}
	for target, w := range map[Target][]string{TargetVirt: virt, TargetRPi: pi} {
		for _, wrong := range []string{"x86-64", "ttyS0"} {
			if has(w, wrong) {
				t.Errorf("%s: a warning speaks of %s: %q", target, wrong, w)
			}
		}
	}
	c.SerialConsole = "disabled"
	if w := c.IgnoredFor(TargetRPi); !has(w, `SerialConsole "disabled": the Pi's UART (serial0) stays on without a console`) {
		t.Errorf("arm64-rpi, SerialConsole disabled: %q", w)
	}

	// Retarget: the config's own (amd64, by its GOARCH) warnings for
	// the Pi instead, the others kept.
	c.SerialConsole = "off"
	own := append([]string{"X: unknown field, ignored"}, c.Ignored()...)
	if got, want := c.Retarget(own, TargetRPi), append([]string{"X: unknown field, ignored"}, pi...); !slices.Equal(got, want) {
		t.Errorf("Retarget to arm64-rpi:\n got %q\nwant %q", got, want)
	}
	if got := c.Retarget(own, TargetPC); !slices.Equal(got, own) {
		t.Errorf("Retarget to the config's own target changed the warnings: %q", got)
	}
}

// gok new's config (GOARCH=arm64, no FirmwarePackage, SerialConsole
// disabled) is a Raspberry Pi's: as it loads, it warns of nothing the Pi
// does differently from what it asks but the UART without a console, and
// names neither x86-64 nor ttyS0.
func TestGokNewPiWarnings(t *testing.T) {
	c, warnings := load(t, "testdata/gokrazy/gok-new.json")
	if ch, err := c.ChooseTarget(""); err != nil || ch.Target != TargetRPi {
		t.Fatalf("gok new's config: target %v, %v; want %s", ch, err, TargetRPi)
	}
	for _, w := range warnings {
		if strings.Contains(w, "x86-64") || strings.Contains(w, "ttyS0") {
			t.Errorf("a Pi config's warning speaks of another board: %q", w)
		}
	}
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.HasPrefix(w, `SerialConsole "disabled": the Pi's UART`) }) {
		t.Errorf("warnings %q: want SerialConsole disabled read as the Pi's", warnings)
	}
}
