package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// gokrazy instance configs, as they are. nvboot reads the config.json of a
// gokrazy instance (~/gokrazy/NAME/config.json) unchanged: the schema is
// gokrazy's (github.com/gokrazy/internal, package config: Struct,
// UpdateStruct, PackageConfig, MountDevice, InternalCompatibilityFlags),
// whose fields nvboot has not already are the embedded Gokrazy and
// GokrazyPackage. Every field is either honoured or named once in a
// warning saying why it does not apply (Ignored); the package
// documentation has the table, field by field.
//
// As gokrazy (which decodes with json.Unmarshal), an unknown key is not an
// error: it is a warning. A config that uses any of nvboot's own fields
// (NvbootOnly) is nvboot's, and there a misspelt key is an error, as it
// always was.

// Gokrazy are the top-level fields of gokrazy's config.Struct that
// nvboot's own config does not have.
type Gokrazy struct {
	// Environment holds KEY=VALUE pairs for go build of every service, as
	// gokrazy applies them to its packer's environment; GOOS must be linux
	// and GOARCH amd64 or arm64 (SupportedGOARCHes), or unset. GOARCH
	// chooses the image's target (ChooseTarget).
	Environment []string `json:",omitempty"`
	// SerialConsole: "" (gokrazy's "serial0,115200"), "serial0,115200" and
	// "UART0" are the console nvboot always has, the board's first serial
	// port at 115200 (ttyS0 on the pc board, ttyAMA0 on virt); another
	// value such as "ttyS1,9600" is added as console= (the last console= on
	// the command line is /dev/console); "disabled" and "off" are warned
	// about: nvboot's boot markers and nvboot run read the serial console.
	// On a Raspberry Pi it is gokrazy's reading (host/image/rpi): serial0
	// is the firmware's name for the UART on the GPIO header, enable_uart
	// in config.txt; "disabled" leaves the UART without a console, "off"
	// turns it off.
	SerialConsole string `json:",omitempty"`
	// KernelExtraArgs are added to the kernel command line, after
	// KernelCmdline.
	KernelExtraArgs []string `json:",omitempty"`
	// MountDevices are mounted by nvinit before the services start (a
	// Source under /dev; others are warned about and not mounted).
	MountDevices []MountDevice `json:",omitempty"`
	// Update is gokrazy's update server setting: the endpoint nvboot
	// deploy talks to (update.go).
	Update *Update `json:",omitempty"`

	// Raspberry Pi and gokrazy-system fields: the Pi's parts are a Pi
	// image's (rpi.go, host/image/rpi); the rest, and the Pi's on another
	// target, are warned about when set (IgnoredFor).
	DeviceType                 string                      `json:",omitempty"`
	GokrazyPackages            *[]string                   `json:",omitempty"`
	KernelPackage              *string                     `json:",omitempty"`
	FirmwarePackage            *string                     `json:",omitempty"`
	EEPROMPackage              *string                     `json:",omitempty"`
	BootloaderExtraLines       []string                    `json:",omitempty"`
	BootloaderExtraEEPROM      []string                    `json:",omitempty"`
	InternalCompatibilityFlags *InternalCompatibilityFlags `json:",omitempty"`
}

// GokrazyPackage are the fields of gokrazy's PackageConfig that nvboot's
// own PackageConfig does not have.
type GokrazyPackage struct {
	// GoBuildEnvironment holds KEY=VALUE pairs for this package's go build,
	// after Environment; a GOARCH here must be the image's.
	GoBuildEnvironment []string `json:",omitempty"`
	// GoBuildTags are build tags, after "gokrazy" (which a gokrazy config's
	// packages are built with, as gokrazy's packer does).
	GoBuildTags []string `json:",omitempty"`
	// ExtraFilePaths maps a path on the device's root filesystem to a host
	// path, relative to the config file's directory: PATH_GOARCH.tar (the
	// image's GOARCH), PATH.tar (unpacked at the destination), or PATH
	// itself (a file, or a directory copied whole), looked for in that
	// order as gokrazy does.
	ExtraFilePaths map[string]string `json:",omitempty"`
	// ExtraFileContents maps a path on the root filesystem to the file's
	// text (mode 0644).
	ExtraFileContents map[string]string `json:",omitempty"`
	// Basename overrides the program name (the path's last element),
	// which may not be one the image keeps for its own programs
	// (reservedNames: nvinit, poold, poolctl, ld-off2f...).
	Basename string `json:",omitempty"`
	// WaitForClock: start the service only once the clock is set (as
	// WaitFor "clock").
	WaitForClock bool `json:",omitempty"`
}

// MountDevice is gokrazy's: mount Source on Target.
type MountDevice struct {
	Source  string // e.g. /dev/vdb1 (gokrazy also takes PARTUUID=...)
	Type    string // e.g. ext4
	Target  string // e.g. /mnt/usb, made on the root filesystem by the build
	Options string // mount(8)-like: ro, nosuid, ... and filesystem data
}

// Update is gokrazy's UpdateStruct, and nvboot's Registry.
type Update struct {
	Hostname     string `json:",omitempty"`
	UseTLS       string `json:",omitempty"`
	NoPassword   bool   `json:",omitempty"`
	HTTPPort     string `json:",omitempty"`
	HTTPSPort    string `json:",omitempty"`
	HTTPPassword string `json:",omitempty"`
	CertPEM      string `json:",omitempty"`
	KeyPEM       string `json:",omitempty"`
	// Registry makes the appliance pull its updates from an OCI registry
	// (registry.go); nil: it does not.
	Registry *Registry `json:",omitempty"`
}

// InternalCompatibilityFlags are gokrazy's old gokr-packer flags; none
// applies to nvboot.
type InternalCompatibilityFlags struct {
	Overwrite          string `json:",omitempty"`
	OverwriteBoot      string `json:",omitempty"`
	OverwriteMBR       string `json:",omitempty"`
	OverwriteRoot      string `json:",omitempty"`
	Sudo               string `json:",omitempty"`
	TargetStorageBytes int    `json:",omitempty"`
	Update             string `json:",omitempty"`
	Insecure           bool   `json:",omitempty"`
	Testboot           bool   `json:",omitempty"`
	InitPkg            string `json:",omitempty"`
	OverwriteInit      string `json:",omitempty"`
}

// WaitFor is a service's WaitFor: nvboot's string ("tcp:8080") or
// gokrazy's list (["net-online"]), one list either way. "tcp:PORT" marks
// the service ready when the port answers (nvboot's readiness); the
// conditions "clock", "net-route" and "net-online" (gokrazy's) hold the
// service's start until they are true.
type WaitFor []string

// The conditions WaitFor may hold a start for.
const (
	WaitClock     = "clock"
	WaitNetRoute  = "net-route"
	WaitNetOnline = "net-online"
)

// UnmarshalJSON takes a string, a list of strings or null.
func (w *WaitFor) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*w = nil
		if s != "" {
			*w = WaitFor{s}
		}
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return errors.New(`WaitFor: want "tcp:PORT" or a list such as ["net-online", "tcp:PORT"]`)
	}
	*w = l
	return nil
}

// MarshalJSON writes nvboot's string form for a lone "tcp:PORT".
func (w WaitFor) MarshalJSON() ([]byte, error) {
	if len(w) == 1 && strings.HasPrefix(w[0], "tcp:") {
		return json.Marshal(w[0])
	}
	return json.Marshal([]string(w))
}

// Ready is the "tcp:PORT" entry, "" if there is none.
func (w WaitFor) Ready() string {
	for _, e := range w {
		if strings.HasPrefix(e, "tcp:") {
			return e
		}
	}
	return ""
}

// StartAfter are the conditions pc's start waits for: WaitFor's, and
// "clock" for WaitForClock, each once, in order.
func (pc PackageConfig) StartAfter() []string {
	var out []string
	for _, e := range pc.WaitFor {
		if !strings.HasPrefix(e, "tcp:") && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	if pc.WaitForClock && !slices.Contains(out, WaitClock) {
		out = append(out, WaitClock)
	}
	return out
}

// ProgramName is the program name of a Packages entry: its Basename, or
// the last element of its path.
func (c *Config) ProgramName(pkg string) string {
	if b := c.PackageConfig[pkg].Basename; b != "" {
		return b
	}
	return Name(pkg)
}

// FromGokrazy says whether c uses any field only gokrazy's schema has: its
// packages are then built with the "gokrazy" build tag, as gokrazy's are.
func (c *Config) FromGokrazy() bool {
	if !isZero(c.Gokrazy) {
		return true
	}
	for _, pc := range c.PackageConfig {
		if !isZero(pc.GokrazyPackage) || len(pc.StartAfter()) > 0 {
			return true
		}
	}
	return false
}

func isZero(v any) bool {
	b, _ := json.Marshal(v)
	return string(b) == "{}"
}

// BuildEnv is what go build of pkg gets added to its environment:
// Environment, then the package's GoBuildEnvironment (as gokrazy, the later
// wins).
func (c *Config) BuildEnv(pkg string) []string {
	return append(slices.Clip(c.Environment), c.PackageConfig[pkg].GoBuildEnvironment...)
}

// BuildTags are the build tags of pkg: "gokrazy" in a config from gokrazy,
// then GoBuildTags; none: no -tags flag.
func (c *Config) BuildTags(pkg string) []string {
	var tags []string
	if c.FromGokrazy() {
		tags = append(tags, "gokrazy")
	}
	return append(tags, c.PackageConfig[pkg].GoBuildTags...)
}

// KernelArgs are what the config adds to the kernel command line:
// KernelCmdline, the SerialConsole's console= when it names another
// console than ttyS0, then KernelExtraArgs.
func (c *Config) KernelArgs() string {
	var args []string
	if c.KernelCmdline != "" {
		args = append(args, c.KernelCmdline)
	}
	switch sc := c.SerialConsole; sc {
	case "", "serial0,115200", "UART0", "disabled", "off":
	default:
		args = append(args, "console="+sc)
	}
	return strings.Join(append(args, c.KernelExtraArgs...), " ")
}

// SupportedGOOS is the GOOS nvboot builds images for (the GOARCHes:
// SupportedGOARCHes).
const SupportedGOOS = "linux"

// reservedDirs are the device paths nvboot's own files and mounts own: an
// extra file or a mount target may not be in them.
var reservedDirs = []string{"/sbin", "/bin", "/lib", "/etc/nvboot", "/nv", "/proc", "/sys", "/dev", "/run", "/tmp", "/perm"}

// reserved says which of reservedDirs holds p ("" when none).
func reserved(p string) string {
	for _, d := range reservedDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return d
		}
	}
	return ""
}

// validateGokrazy checks the fields of gokrazy's schema; names are the
// program names by Packages entry.
func (c *Config) validateGokrazy(bad func(string, ...any)) {
	archBad := false
	buildEnv := func(at string, env []string) {
		checkEnv(at, env, bad)
		for i, e := range env {
			switch k, v, _ := strings.Cut(e, "="); {
			case k == "GOOS" && v != SupportedGOOS:
				bad("%s[%d] %q: nvboot builds linux images only", at, i, e)
			case k == "GOARCH" && !slices.Contains(SupportedGOARCHes, v):
				bad("%s[%d] %q: %s", at, i, e, unsupportedArch(v))
				archBad = true
			}
		}
	}
	buildEnv("Environment", c.Environment)
	for i, p := range c.Packages {
		if strings.HasSuffix(p, "/...") {
			// gokrazy expands a pattern to its main packages; nvboot names
			// each service by its package, so each is listed.
			bad("Packages[%d] %q: a pattern; list each program's package", i, p)
		}
	}
	dests := map[string]string{}
	gateway := slices.ContainsFunc(c.InterfacesOrDefault(), func(in Interface) bool { return in.Gateway != "" })
	for _, k := range sortedKeys(c.PackageConfig) {
		pc, at := c.PackageConfig[k], fmt.Sprintf("PackageConfig[%q]", k)
		for _, tag := range pc.GoBuildTags {
			if tag == "" || strings.ContainsAny(tag, ", \t") {
				bad("%s.GoBuildTags %q: one tag a list entry", at, tag)
			}
		}
		checkExec(at+".GoBuildTags", pc.GoBuildTags, bad)
		if b := pc.Basename; b != "" && (b != path.Base(b) || b == "." || b == ".." || strings.ContainsAny(b, " \t")) {
			bad("%s.Basename %q: a program name, no '/' or blanks", at, b)
		}
		tcp := 0
		for _, e := range pc.WaitFor {
			switch e {
			case WaitClock, WaitNetOnline:
			case WaitNetRoute:
				if !gateway {
					bad("%s.WaitFor %q: no Interfaces entry has a Gateway, so there is never a default route to wait for", at, e)
				}
			default:
				port, ok := strings.CutPrefix(e, "tcp:")
				if n, err := strconv.Atoi(port); !ok || err != nil || n < 1 || n > 65535 {
					bad("%s.WaitFor %q: want tcp:PORT, clock, net-route or net-online", at, e)
				} else if tcp++; tcp == 2 {
					bad("%s.WaitFor: more than one tcp:PORT", at)
				}
			}
		}
		for _, dst := range append(sortedKeys(pc.ExtraFilePaths), sortedKeys(pc.ExtraFileContents)...) {
			field := "ExtraFilePaths"
			if _, ok := pc.ExtraFilePaths[dst]; !ok {
				field = "ExtraFileContents"
			}
			switch {
			case !strings.HasPrefix(dst, "/") || path.Clean(dst) != dst || dst == "/":
				bad("%s.%s[%q]: want a clean absolute path on the root filesystem", at, field, dst)
			case reserved(dst) == "/perm":
				bad("%s.%s[%q]: /perm is the state filesystem, written on the device, not by the build (gokrazy refuses it too)", at, field, dst)
			case reserved(dst) != "":
				bad("%s.%s[%q]: %s holds nvboot's own files", at, field, dst, reserved(dst))
			default:
				if other, dup := dests[dst]; dup {
					bad("%s.%s[%q]: also %s", at, field, dst, other)
				}
				dests[dst] = at + "." + field
			}
		}
	}
	for _, k := range sortedKeys(c.PackageConfig) {
		buildEnv(fmt.Sprintf("PackageConfig[%q].GoBuildEnvironment", k), c.PackageConfig[k].GoBuildEnvironment)
	}
	// A package's GOARCH against the image's (each bad GOARCH is said
	// once: not again as a clash).
	if !archBad {
		if _, err := c.ChooseTarget(""); err != nil {
			bad("%v", err)
		}
	}
	for i, m := range c.MountDevices {
		at := fmt.Sprintf("MountDevices[%d]", i)
		if !strings.HasPrefix(m.Target, "/") || path.Clean(m.Target) != m.Target || m.Target == "/" {
			bad("%s.Target %q: want a clean absolute path other than /", at, m.Target)
		} else if d := reserved(m.Target); d != "" {
			bad("%s.Target %q: %s is nvboot's", at, m.Target, d)
		}
		if m.Type == "" {
			bad("%s.Type: empty (a filesystem type such as ext4)", at)
		}
		if m.Source == "" {
			bad("%s.Source: empty", at)
		}
	}
}

// Ignored is IgnoredFor the config's own target (ChooseTarget with no
// -arch; amd64-pc when it has none).
func (c *Config) Ignored() []string {
	ch, err := c.ChooseTarget("")
	if err != nil {
		ch.Target = TargetPC
	}
	return c.IgnoredFor(ch.Target)
}

// Retarget is warnings, the ones LoadWarn gave for the config's own
// target, for an image of target t instead (-arch): Ignored's warnings
// replaced by IgnoredFor(t)'s.
func (c *Config) Retarget(warnings []string, t Target) []string {
	own, want := c.Ignored(), c.IgnoredFor(t)
	if slices.Equal(own, want) {
		return warnings
	}
	var w []string
	for _, s := range warnings {
		if i := slices.Index(own, s); i >= 0 {
			own = slices.Delete(own, i, i+1)
			continue
		}
		w = append(w, s)
	}
	return append(w, want...)
}

// IgnoredFor names, once each, every field c sets that an image of target
// t does not apply, and why; and each PackageConfig entry that is not in
// Packages. A Raspberry Pi image applies the Pi's parts (KernelPackage,
// FirmwarePackage, EEPROMPackage, BootloaderExtraLines) and reads
// SerialConsole as gokrazy does; another target warns about them, naming
// its own machine.
func (c *Config) IgnoredFor(t Target) []string {
	var w []string
	warn := func(format string, args ...any) { w = append(w, fmt.Sprintf(format, args...)) }
	if c.DeviceType != "" {
		warn("DeviceType %q: names a gokrazy board; %s", c.DeviceType, deviceTypeIgnored(t))
	}
	if p := c.GokrazyPackages; p != nil && len(*p) > 0 {
		warn("GokrazyPackages %q: nvboot builds none of gokrazy's system services: nvinit sets the network up itself (Interfaces) instead of dhcp, nvinit sets the clock by SNTP (NTP) instead of ntp, the kernel seeds its own random pool instead of randomd, and there is no heartbeat", *p)
	}
	w = append(w, c.partsIgnored(t)...)
	w = append(w, c.Update.ignored()...) // update.go
	if f := c.InternalCompatibilityFlags; f != nil {
		b, _ := json.Marshal(f)
		var set map[string]any
		json.Unmarshal(b, &set)
		for _, k := range sortedKeys(set) {
			warn("InternalCompatibilityFlags.%s: an old gokr-packer flag for writing and updating gokrazy's own SD card layout; nvboot build writes its output directory and nvboot flash the card", k)
		}
	}
	for i, m := range c.MountDevices {
		if !strings.HasPrefix(m.Source, "/dev/") {
			warn("MountDevices[%d].Source %q: nvinit mounts device paths (/dev/...) only: not mounted", i, m.Source)
		}
	}
	resolver := false
	for _, pc := range c.PackageConfig {
		_, f := pc.ExtraFilePaths["/etc/resolv.conf"]
		_, t := pc.ExtraFileContents["/etc/resolv.conf"]
		resolver = resolver || f || t
	}
	resolver = resolver || len(c.NameserversOrDefault()) > 0
	for _, k := range sortedKeys(c.PackageConfig) {
		if slices.Contains(c.PackageConfig[k].WaitFor, WaitNetOnline) && !resolver {
			warn("PackageConfig[%q].WaitFor %q: the image's /etc/resolv.conf names no DNS server (Interfaces without Nameservers), so the name lookup it waits for never succeeds (set Nameservers)", k, WaitNetOnline)
		}
	}
	inPackages := map[string]bool{}
	for _, p := range c.Packages {
		inPackages[p] = true
	}
	for _, k := range sortedKeys(c.PackageConfig) {
		if inPackages[k] {
			continue
		}
		pc := c.PackageConfig[k]
		if len(pc.ExtraFilePaths)+len(pc.ExtraFileContents) > 0 {
			warn("PackageConfig[%q]: not in Packages, so nothing is built or started for it; its ExtraFilePaths and ExtraFileContents are placed all the same, as gokrazy does", k)
		} else {
			warn("PackageConfig[%q]: not in Packages: ignored", k)
		}
	}
	return w
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Kinds of ExtraFilePaths sources.
const (
	ExtraFile = "file"
	ExtraDir  = "directory"
	ExtraTar  = "tar"
)

// ExtraFileSource finds the host source of an ExtraFilePaths entry p,
// relative to dir (the config file's) unless absolute, in gokrazy's order:
// p_GOARCH.tar (the image's GOARCH: p_arm64.tar for an arm64 image), p.tar,
// then p itself, a file or a directory.
func ExtraFileSource(dir, p, goarch string) (src, kind string, err error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	for _, tarball := range []string{p + "_" + goarch + ".tar", p + ".tar"} {
		if fi, err := os.Stat(tarball); err == nil && fi.Mode().IsRegular() {
			return tarball, ExtraTar, nil
		}
	}
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("no %s_%s.tar, %s.tar or %s: %w", p, goarch, p, p, err)
	case fi.IsDir():
		return p, ExtraDir, nil
	case fi.Mode().IsRegular():
		return p, ExtraFile, nil
	}
	return "", "", fmt.Errorf("%s is neither a file nor a directory", p)
}
