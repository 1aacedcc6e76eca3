package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Target is the board an image is built for: an instruction set (its
// GOARCH, before the dash) and how that board boots (after it). Every
// program of an image, its loader and its kernel are the target's
// machine; the board decides the disk's boot files.
type Target string

// The targets nvboot builds for.
const (
	// TargetPC is an x86-64 board: UEFI firmware boots the disk's unified
	// kernel image; pmem as e820 regions or NVDIMMs. In QEMU, the pc board.
	TargetPC Target = "amd64-pc"
	// TargetVirt is an arm64 board with UEFI firmware (EFI/BOOT/BOOTAA64.EFI
	// on the disk): QEMU's virt board, a cloud or server arm64 machine.
	TargetVirt Target = "arm64-virt"
	// TargetRPi is a Raspberry Pi (3, 4, 5, Zero 2 W): its boot ROM reads
	// the firmware, kernel and config.txt from a FAT boot partition. What
	// gokrazy builds a config for when it names no GOARCH.
	TargetRPi Target = "arm64-rpi"
)

// Targets are every Target, in the order help texts list them.
var Targets = []Target{TargetPC, TargetVirt, TargetRPi}

// SupportedGOARCHes are the instruction sets nvboot builds images for.
var SupportedGOARCHes = []string{"amd64", "arm64"}

// GOARCH is the target's instruction set as Go names it.
func (t Target) GOARCH() string {
	arch, _, _ := strings.Cut(string(t), "-")
	return arch
}

// Board says in words what the target boots on.
func (t Target) Board() string {
	switch t {
	case TargetPC:
		return "an x86-64 board with UEFI firmware (QEMU's pc)"
	case TargetVirt:
		return "an arm64 board with UEFI firmware (QEMU's virt)"
	case TargetRPi:
		return "a Raspberry Pi 3, 4, 5 or Zero 2 W"
	}
	return "an unknown board"
}

// ParseTarget checks a target name.
func ParseTarget(s string) (Target, error) {
	if t := Target(s); slices.Contains(Targets, t) {
		return t, nil
	}
	return "", fmt.Errorf("target %q: unknown (want one of %s)", s, targetNames())
}

func targetNames() string {
	names := make([]string, len(Targets))
	for i, t := range Targets {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// TargetChoice is the target a build takes and why: the first line a
// build prints (String).
type TargetChoice struct {
	Target Target
	// Why names what chose it: the -arch flag, the config's GOARCH, or the
	// default for the kind of config, and what chose the board.
	Why string
}

func (ch TargetChoice) String() string {
	return fmt.Sprintf("target %s, %s: %s", ch.Target, ch.Target.Board(), ch.Why)
}

// gokrazyPiFirmware is gokrazy's FirmwarePackage when a config leaves it
// unset (FirmwarePackageOrDefault in gokrazy's config package): the Pi's.
const gokrazyPiFirmware = "github.com/gokrazy/firmware"

// ChooseTarget picks the target of an image of c. arch is `nvboot build
// -arch`: a GOARCH (amd64, arm64), a Target name, or "" for none.
//
// The instruction set is, first to last: -arch (over the config's, which
// the build then overrides: the command line is the later, more explicit
// word), the last GOARCH in Environment (go's rule for a repeated
// variable), and else the default of the kind of config: arm64 for a
// gokrazy instance config (GokrazyInstance), since gokrazy builds one
// without GOARCH for the Raspberry Pi; amd64 for any other, nvboot's own
// configs among them. An arm64 image is for the Pi when the config names
// a Pi part (PiParts), else for the virt board. A package's
// GoBuildEnvironment GOARCH other than the image's is an error naming
// both: an image never mixes machines (one loader, one text store).
func (c *Config) ChooseTarget(arch string) (TargetChoice, error) {
	env, envAt := c.envGOARCH()
	var ch TargetChoice
	named := Target("")
	switch {
	case arch != "" && slices.Contains(Targets, Target(arch)):
		named, ch.Why = Target(arch), "-arch "+arch
		arch = named.GOARCH()
	case arch != "" && slices.Contains(SupportedGOARCHes, arch):
		ch.Why = "-arch " + arch
	case arch != "":
		return ch, fmt.Errorf("-arch %q: want a GOARCH nvboot builds for (%s) or a target (%s)", arch, strings.Join(SupportedGOARCHes, ", "), targetNames())
	case env != "":
		if !slices.Contains(SupportedGOARCHes, env) {
			return ch, fmt.Errorf("%s %q: %s", envAt, "GOARCH="+env, unsupportedArch(env))
		}
		arch, ch.Why = env, fmt.Sprintf("the config's %s %q", envAt, "GOARCH="+env)
	case c.GokrazyInstance():
		arch, ch.Why = "arm64", "a gokrazy config naming no GOARCH, which gokrazy builds for arm64 (its default board is the Raspberry Pi; set GOARCH in Environment, or -arch, for another)"
	default:
		arch, ch.Why = "amd64", "no GOARCH in the config's Environment and no -arch: nvboot's default"
	}
	if env != "" && env != arch {
		ch.Why += fmt.Sprintf(", over the config's %s %q", envAt, "GOARCH="+env)
	}
	switch {
	case named != "":
		ch.Target = named
	case arch == "amd64":
		ch.Target = TargetPC
	default:
		if parts := c.PiParts(); len(parts) > 0 {
			ch.Target = TargetRPi
			ch.Why += "; the Raspberry Pi, by its " + strings.Join(parts, ", ")
		} else {
			ch.Target = TargetVirt
			ch.Why += "; the virt board, as the config names no Raspberry Pi part"
		}
	}
	goarch := ch.Target.GOARCH()
	for _, k := range sortedKeys(c.PackageConfig) {
		for i, e := range c.PackageConfig[k].GoBuildEnvironment {
			if v, ok := strings.CutPrefix(e, "GOARCH="); ok && v != goarch {
				return ch, fmt.Errorf("PackageConfig[%q].GoBuildEnvironment[%d] %q: the image is built for %s (%s): an image never mixes machines (one loader and one text store serve every program); drop it or build the image for %s", k, i, e, goarch, ch.Why, v)
			}
		}
	}
	return ch, nil
}

// unsupportedArch says why a GOARCH is not built.
func unsupportedArch(v string) string {
	return fmt.Sprintf("nvboot builds for %s only; %s is not built (the loader, the OFF2F converter and the kernel fragments are amd64's and arm64's): set GOARCH=amd64 or arm64, or leave it out", strings.Join(SupportedGOARCHes, " and "), v)
}

// envGOARCH is the last GOARCH in Environment (go's environment takes the
// last of a repeated variable) and the entry that names it.
func (c *Config) envGOARCH() (goarch, at string) {
	for i, e := range c.Environment {
		if v, ok := strings.CutPrefix(e, "GOARCH="); ok {
			goarch, at = v, fmt.Sprintf("Environment[%d]", i)
		}
	}
	return goarch, at
}

// GokrazyInstance says whether c is a gokrazy instance's config, as gokrazy
// reads it: it sets a field only gokrazy's schema has (FromGokrazy) other
// than Update, and none of nvboot's own (NvbootOnly). Such a config is
// built as gokrazy builds it, for the Raspberry Pi when it names no
// GOARCH; any other, the demo and examples/*.json among them, is nvboot's.
// Update does not count: nvboot's own configs set it for nvboot deploy and
// update (README), and a config of Packages and Update was x86-64's
// before arm64 was built.
func (c *Config) GokrazyInstance() bool {
	g := *c
	g.Update = nil
	return g.FromGokrazy() && !c.setsNvbootOnly()
}

// setsNvbootOnly says whether c sets (to other than the zero value) one of
// NvbootOnly, at the top level or in a PackageConfig.
func (c *Config) setsNvbootOnly() bool {
	set := func(v any) bool {
		b, _ := json.Marshal(v)
		var m map[string]json.RawMessage
		json.Unmarshal(b, &m)
		for k := range m {
			if containsFold(NvbootOnly, k) {
				return true
			}
		}
		return false
	}
	top := *c
	top.PackageConfig = nil
	if set(top) {
		return true
	}
	for _, pc := range c.PackageConfig {
		if set(pc) {
			return true
		}
	}
	return false
}

// PiParts names what in c makes an arm64 image one for the Raspberry Pi:
// a FirmwarePackage, EEPROMPackage, BootloaderExtraLines or
// BootloaderExtraEEPROM, or, in a gokrazy instance config, FirmwarePackage
// left unset (gokrazy then uses the Pi's). gokrazy's way to build for
// another arm64 board is FirmwarePackage "" (with a KernelPackage such as
// github.com/gokrazy/kernel.arm64). None: the virt board.
func (c *Config) PiParts() []string {
	var parts []string
	switch p := c.FirmwarePackage; {
	case p != nil && *p != "":
		parts = append(parts, fmt.Sprintf("FirmwarePackage %q", *p))
	case p == nil && c.GokrazyInstance():
		parts = append(parts, fmt.Sprintf("FirmwarePackage left unset (gokrazy's default: %s)", gokrazyPiFirmware))
	}
	if p := c.EEPROMPackage; p != nil && *p != "" {
		parts = append(parts, fmt.Sprintf("EEPROMPackage %q", *p))
	}
	if len(c.BootloaderExtraLines) > 0 {
		parts = append(parts, "BootloaderExtraLines")
	}
	if len(c.BootloaderExtraEEPROM) > 0 {
		parts = append(parts, "BootloaderExtraEEPROM")
	}
	return parts
}
