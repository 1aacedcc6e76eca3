package config

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/fsdax"
)

// Config is one appliance image.
type Config struct {
	// Hostname of the appliance; default "nvboot".
	Hostname string `json:",omitempty"`
	// Packages are the services: Go import paths buildable from the current
	// module ("github.com/nvboot/nvboot/examples/kv") or local directories
	// ("./examples/kv"), started in this order.
	Packages []string
	// PackageConfig holds per-package settings, keyed by the Packages entry.
	PackageConfig map[string]PackageConfig `json:",omitempty"`
	// KernelPath is the bzImage, relative to the config file's directory
	// unless absolute; empty: the cached build of kernel-config/.
	KernelPath string `json:",omitempty"`
	// NoBootTrims keeps the kernel's ACPI interrupt routing, PS/2 probing
	// and IO-APIC timer check, which nvboot otherwise turns off
	// (appliance.BootTrims: acpi=noirq i8042.noaux i8042.nokbd
	// no_timer_check). Set it for boards whose PCI interrupts need ACPI
	// routing.
	NoBootTrims bool `json:",omitempty"`
	// KernelCmdline is appended to the command line nvboot sets.
	KernelCmdline string `json:",omitempty"`
	// TextStoreMiB is the size of the text store's filesystem; 0: fitted to
	// the programs (the 2 MiB clusters their texts take, plus room). Its pmem image is that plus 2 MiB of fsdax metadata,
	// rounded up to a multiple of PmemUnitMiB, and the filesystem grows to
	// fill it: the build warns when that makes it larger than asked.
	TextStoreMiB int `json:",omitempty"`
	// StateMiB is the size of the pmem state image (/nv/state), a
	// multiple of 2; default 128. It is rounded up to a multiple of
	// PmemUnitMiB, and the build warns when it rounds: StateMiB 64 builds
	// a 128 MiB image. The state filesystem is the image less 2 MiB of
	// fsdax metadata. Rounded rather than honoured, because the default
	// board (pmem as e820 regions) takes only whole 128 MiB regions, and
	// one image boots on either kind of pmem.
	StateMiB int `json:",omitempty"`
	// Interfaces are static IPv4 settings nvinit applies before the services
	// start; empty: eth0 10.0.2.15/24 via 10.0.2.2, QEMU's user network.
	Interfaces []Interface `json:",omitempty"`
	// Nameservers are the DNS servers the image's /etc/resolv.conf names,
	// IPv4 or IPv6 addresses, at most MaxNameservers; empty: QEMU's user
	// network's (DefaultNameservers) when Interfaces is empty too, else
	// none (names beyond /etc/hosts do not resolve).
	Nameservers []string `json:",omitempty"`
	// NTP are the SNTP servers, HOST or HOST:PORT, nvinit sets the clock
	// from once the network is up (device/sntp). Unset: DefaultNTP on a
	// board without a real-time clock (a Raspberry Pi boots at 1970), none
	// on a QEMU board (its RTC starts at the host's time, and its user
	// network reaches no NTP server unless a test runs one). [] : none.
	NTP []string `json:",omitzero"`
	// RootFS is the root filesystem type: "erofs" (default) or "ext4".
	RootFS string `json:",omitempty"`
	// Slots 2 lays disk.img out for `nvboot update`: two slots, A and B,
	// each a root partition and a boot partition with its own unified
	// kernel image, updated one while the other runs and switched to by a
	// test boot that comes back by itself when the new slot fails. 0 (or
	// 1): one root, as before.
	Slots int `json:",omitempty"`
	// TestBootDeadline bounds an update's test boot (a Go duration,
	// default 2m): every service must be ready by then or the appliance
	// reboots into the old slot. Only with Slots 2.
	TestBootDeadline string `json:",omitempty"`
	// Userland is the shell and tools the image carries (Userland*):
	// "none" (default: no shell, the console takes nvinit's own commands)
	// or "u-root" (u-root's core commands, one Go binary built in busybox
	// mode, an OFF2F program like the services; its shell on the console).
	Userland string `json:",omitempty"`
	// Version is the image's version, one to four numbers separated by
	// dots (1.4.2; contract.ValidVersion): in image.json, on the root
	// (contract.VersionPath) and the version annotation of what nvboot
	// push publishes, whose -version sets it instead. An appliance that
	// pulls its updates orders images by it. Empty: none.
	Version string `json:",omitempty"`

	// Gokrazy are the fields of gokrazy's instance config that nvboot's
	// own schema lacks, at the top level as in gokrazy's (gokrazy.go).
	Gokrazy
}

// Interface is one network interface's static IPv4 setting.
type Interface struct {
	Name    string // e.g. eth0
	Address string // with the prefix length, e.g. 192.168.1.20/24
	Gateway string `json:",omitempty"` // default route; empty: none
}

// DefaultInterfaces is QEMU's user network (what nvboot run and measure use).
var DefaultInterfaces = []Interface{{Name: "eth0", Address: "10.0.2.15/24", Gateway: "10.0.2.2"}}

// InterfacesOrDefault returns Interfaces, or DefaultInterfaces when empty.
func (c *Config) InterfacesOrDefault() []Interface {
	if len(c.Interfaces) == 0 {
		return DefaultInterfaces
	}
	return c.Interfaces
}

// DefaultNameservers is the DNS server of QEMU's user network, which goes
// with DefaultInterfaces.
var DefaultNameservers = []string{"10.0.2.3"}

// DefaultNTP is what a board without a real-time clock asks when NTP is
// unset: the NTP Pool's, as most distributions' defaults.
var DefaultNTP = []string{"pool.ntp.org"}

// NTPOrDefault is NTP, or when unset DefaultNTP on a board without a
// real-time clock (noRTC) and none on another.
func (c *Config) NTPOrDefault(noRTC bool) []string {
	if c.NTP == nil && noRTC {
		return DefaultNTP
	}
	return c.NTP
}

// MaxNameservers is how many nameserver lines resolvers read (glibc's
// MAXNS, Go's net package): more would be ignored on the device.
const MaxNameservers = 3

// NameserversOrDefault returns Nameservers; when empty, DefaultNameservers
// if the network is the default one too, else none: a network of one's
// own has no DNS server nvboot could know.
func (c *Config) NameserversOrDefault() []string {
	if len(c.Nameservers) == 0 && len(c.Interfaces) == 0 {
		return DefaultNameservers
	}
	return c.Nameservers
}

// PackageConfig is how one service is built and started.
type PackageConfig struct {
	// GoBuildFlags are passed to go build (e.g. "-tags=netgo").
	GoBuildFlags []string `json:",omitempty"`
	// Environment is added to the service's environment, as KEY=VALUE.
	Environment []string `json:",omitempty"`
	// CommandLineFlags are the service's arguments.
	CommandLineFlags []string `json:",omitempty"`
	// WaitFor is how nvinit knows the service is ready: "tcp:PORT" (a TCP
	// connect to 127.0.0.1:PORT succeeds); empty: ready once started. As
	// in gokrazy it may also be a list, holding "tcp:PORT" and conditions
	// the start waits for: "clock", "net-route", "net-online" (WaitFor).
	WaitFor WaitFor `json:",omitempty"`
	// ForwardPort is the guest TCP port `nvboot run` and `measure` forward
	// from the host and probe for the first successful request; 0: none.
	// Like WaitFor's port it is this service's alone: no other service's,
	// nor the update endpoint's (validatePorts).
	ForwardPort int `json:",omitempty"`
	// DontStart builds and installs the program without starting it.
	DontStart bool `json:",omitempty"`
	// Pool starts the service through poold (nvboot's process pool): the
	// image then carries poold, started before the services, and the
	// program (which imports github.com/nvboot/nvboot/pool) is kept parked,
	// so a start or restart is an activation. nil: fork and exec.
	Pool *Pool `json:",omitempty"`
	// Checker is how `nvboot powercut` writes to the service and checks,
	// after each power cut, that what it acknowledged survived; the
	// service needs a ForwardPort, and at most one service has a Checker.
	// nil: powercut refuses the config and its images.
	Checker *Checker `json:",omitempty"`

	// GokrazyPackage are the fields of gokrazy's PackageConfig that
	// nvboot's own lacks (gokrazy.go).
	GokrazyPackage
}

// Checker is a service's side of `nvboot powercut`: an HTTP API on its
// ForwardPort that stores keyed values durably, and a check of its state
// that the service runs at start. examples/powercut.json declares kv's.
type Checker struct {
	// Values is the path prefix of what must survive a power cut, e.g.
	// "/kv/": a PUT of Values+KEY with the value as its body stores it and
	// answers 204 once it is durable; a GET of Values+KEY answers 200 and
	// the value. powercut reads back every value that got its 204.
	Values string
	// Check is the path of a GET answering a JSON object whose "check" is
	// the service's check of its state at its start, e.g. "/stats": "ok"
	// when consistent, "off" or absent when it did not check (the image
	// is then unsuitable), anything else the problem found.
	Check string `json:",omitempty"`
	// Command, instead of Check, checks from the host: powercut runs it
	// after each boot with NVBOOT_URL set to the service's address
	// (http://127.0.0.1:PORT); exit status 0 means consistent, any other
	// its output is the problem. Command[0] is looked up as os/exec does.
	Command []string `json:",omitempty"`
}

// Pool is how poold keeps one service's program (see contract.Program).
type Pool struct {
	// MinIdle processes are kept parked; MaxIdle bounds what a burst of
	// starts makes poold keep (default: MinIdle; both 0: parked on demand).
	MinIdle int `json:",omitempty"`
	MaxIdle int `json:",omitempty"`
	// IdleTimeout trims processes parked longer than this, down to
	// MinIdle (a Go duration, e.g. "30s"); empty: never.
	IdleTimeout string `json:",omitempty"`
	// MaxUses is poold's (contract.Program.MaxUses): 0, a fresh process per
	// start; 1, a fresh process too, whose end is known as soon as main
	// returns if the program calls pool.Reusable; above 1, one such
	// process serves up to that many activations.
	MaxUses int `json:",omitempty"`
	// Prefault faults the program's text and data in before it parks.
	Prefault bool `json:",omitempty"`
}

// Defaults.
const (
	DefaultHostname = "nvboot"
	DefaultStateMiB = 128
	DefaultRootFS   = "erofs"
)

// The values of Userland.
const (
	// UserlandNone is no shell and no tools: what every image had before
	// the field, and still the default (nothing to log in to, the
	// smallest root).
	UserlandNone = "none"
	// UserlandURoot is u-root's core commands in busybox mode, gosh on
	// the console (host/image/appliance/userland.go).
	UserlandURoot = "u-root"
)

// Userlands are Userland's values.
var Userlands = []string{UserlandNone, UserlandURoot}

// PmemUnitMiB is what every pmem image's size is a multiple of: the kernel
// adds pmem in 128 MiB memory sections, and a region given as e820 RAM
// (the default board) must be whole sections.
const PmemUnitMiB = 128

// pmemImageMiB is the size of the pmem image holding a filesystem of fsMiB:
// the fsdax metadata added, rounded up to PmemUnitMiB.
func pmemImageMiB(fsMiB int) int {
	return (fsMiB + int(fsdax.Align>>20) + PmemUnitMiB - 1) / PmemUnitMiB * PmemUnitMiB
}

// StateImageMiB is the size of pmem-state.img: StateMiB (or its default)
// rounded up to a multiple of PmemUnitMiB.
func (c *Config) StateImageMiB() int {
	return (c.StateMiBOrDefault() + PmemUnitMiB - 1) / PmemUnitMiB * PmemUnitMiB
}

// Rounded names each size field whose pmem image the build makes larger
// than the field says (StateMiB, TextStoreMiB), with what it becomes:
// warnings, printed with the config's others.
func (c *Config) Rounded() []string {
	var w []string
	if c.StateMiB > 0 && c.StateImageMiB() != c.StateMiB {
		img := c.StateImageMiB()
		w = append(w, fmt.Sprintf("StateMiB %d: the state image is %d MiB, rounded up to a multiple of %d MiB (the kernel adds pmem in %d MiB sections); its filesystem has %d MiB",
			c.StateMiB, img, PmemUnitMiB, PmemUnitMiB, img-int(fsdax.Align>>20)))
	}
	if t := c.TextStoreMiB; t > 0 {
		if img := pmemImageMiB(t); img-int(fsdax.Align>>20) != t {
			w = append(w, fmt.Sprintf("TextStoreMiB %d: the text store image is %d MiB (the filesystem and 2 MiB of fsdax metadata, rounded up to a multiple of %d MiB), and its filesystem fills it: %d MiB",
				t, img, PmemUnitMiB, img-int(fsdax.Align>>20)))
		}
	}
	return w
}

// HostnameOrDefault and friends fill in the defaults.
func (c *Config) HostnameOrDefault() string { return cmp.Or(c.Hostname, DefaultHostname) }
func (c *Config) StateMiBOrDefault() int    { return cmp.Or(c.StateMiB, DefaultStateMiB) }
func (c *Config) RootFSOrDefault() string   { return cmp.Or(c.RootFS, DefaultRootFS) }
func (c *Config) UserlandOrDefault() string { return cmp.Or(c.Userland, UserlandNone) }

// HasShell says whether the image carries a shell on its console.
func (c *Config) HasShell() bool { return c.UserlandOrDefault() != UserlandNone }

// PooldName is the program name of poold in an image with pooled services.
const PooldName = "poold"

// Pooled reports whether any service starts through poold.
func (c *Config) Pooled() bool {
	for _, pc := range c.PackageConfig {
		if pc.Pool != nil {
			return true
		}
	}
	return false
}

// Name is the program name of a package: the last element of its path.
func Name(pkg string) string { return path.Base(strings.TrimRight(pkg, "/")) }

// Demo is the default image: the kv example, ready when it listens on 8080.
func Demo() *Config {
	const kv = "github.com/nvboot/nvboot/examples/kv"
	return &Config{
		Packages: []string{kv},
		PackageConfig: map[string]PackageConfig{kv: {
			CommandLineFlags: []string{"-listen", ":8080", "-heap", contract.StateDir + "/kv.heap"},
			WaitFor:          WaitFor{"tcp:8080"},
			ForwardPort:      8080,
		}},
	}
}

// Load is LoadWarn for callers that do not show warnings.
func Load(p string) (*Config, error) {
	c, _, err := LoadWarn(p)
	return c, err
}

// LoadWarn reads the config file at p (nvboot's, or a gokrazy instance's
// config.json: Parse) and runs every check that needs no compiling: the
// fields (Validate), the paths it names (CheckPaths, relative to p's
// directory) and the tools every build runs (Tools, CheckTools). The
// warnings name each unknown key and each field nvboot does not apply.
func LoadWarn(p string) (*Config, []string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	c, warnings, err := Parse(b)
	if err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", p, err)
	}
	if err := c.CheckPaths(filepath.Dir(p)); err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", p, err)
	}
	// What every layout's build runs; the layout's own tools are checked
	// when the build starts (appliance.CheckTools), still before compiling.
	if err := CheckTools(c.Tools(Needs{})); err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", p, err)
	}
	return c, warnings, nil
}

// Validate checks every field, naming the one that is wrong.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Hostname != "" && !contract.ValidHostname(c.Hostname) {
		bad("Hostname %q: letters, digits and '-', up to 63", c.Hostname)
	}
	if len(c.Packages) == 0 {
		bad("Packages: empty (list at least one service)")
	}
	names := map[string]string{}
	for i, p := range c.Packages {
		if strings.TrimSpace(p) == "" {
			bad("Packages[%d]: empty", i)
			continue
		}
		n := c.ProgramName(p)
		if other, dup := names[n]; dup {
			bad("Packages[%d] %q: program name %q is also %q's", i, p, n, other)
		}
		names[n] = p
		if what, ok := reservedNames[n]; ok {
			if b := c.PackageConfig[p].Basename; b != "" {
				bad("PackageConfig[%q].Basename %q: reserved: the name is %s", p, b, what)
			} else {
				bad("Packages[%d] %q: program name %q is reserved: the name is %s (give the service another with Basename)", i, p, n, what)
			}
		}
	}
	keys := make([]string, 0, len(c.PackageConfig))
	for k := range c.PackageConfig {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var checkers []string
	for _, k := range keys {
		// A key not in Packages is a warning (Ignored), as in gokrazy,
		// whose own `gok new` writes one for its randomd.
		pc, at := c.PackageConfig[k], fmt.Sprintf("PackageConfig[%q]", k)
		checkExec(at+".CommandLineFlags", pc.CommandLineFlags, bad)
		checkEnv(at+".Environment", pc.Environment, bad)
		checkExec(at+".GoBuildFlags", pc.GoBuildFlags, bad)
		if pl := pc.Pool; pl != nil {
			if pl.MinIdle < 0 || pl.MaxIdle < 0 || pl.MaxUses < 0 {
				bad("PackageConfig[%q].Pool: MinIdle, MaxIdle and MaxUses want ≥ 0", k)
			}
			if pl.MaxIdle != 0 && pl.MaxIdle < pl.MinIdle {
				bad("PackageConfig[%q].Pool.MaxIdle %d is below MinIdle %d", k, pl.MaxIdle, pl.MinIdle)
			}
			if pl.IdleTimeout != "" {
				if d, err := time.ParseDuration(pl.IdleTimeout); err != nil || d < 0 {
					bad("PackageConfig[%q].Pool.IdleTimeout %q: want a duration such as 30s", k, pl.IdleTimeout)
				}
			}
		}
		if ch := pc.Checker; ch != nil {
			checkers = append(checkers, k)
			validateChecker(k, ch, pc.ForwardPort, bad)
		}
		if pc.ForwardPort != 0 && (pc.ForwardPort < 1 || pc.ForwardPort > 65535) {
			bad("PackageConfig[%q].ForwardPort %d: not a TCP port", k, pc.ForwardPort)
		}
	}
	if len(checkers) > 1 {
		bad("PackageConfig: %q all have a Checker; nvboot powercut checks one service, keep one", checkers)
	}
	c.validatePorts(bad)
	// The kernel command line is a C string too: a NUL would end it there.
	for i, a := range append([]string{c.KernelCmdline}, c.KernelExtraArgs...) {
		if j := strings.IndexByte(a, 0); j >= 0 {
			at := "KernelCmdline"
			if i > 0 {
				at = fmt.Sprintf("KernelExtraArgs[%d]", i-1)
			}
			bad("%s %.80q: a NUL at byte %d would end the kernel command line there", at, a, j)
		}
	}
	if c.TextStoreMiB < 0 || (c.TextStoreMiB > 0 && c.TextStoreMiB%2 != 0) {
		bad("TextStoreMiB %d: a positive multiple of 2 (or 0: fitted)", c.TextStoreMiB)
	}
	if c.StateMiB < 0 || (c.StateMiB > 0 && c.StateMiB%2 != 0) {
		bad("StateMiB %d: a positive multiple of 2 (or 0: %d)", c.StateMiB, DefaultStateMiB)
	}
	ifnames := map[string]int{}
	for i, in := range c.Interfaces {
		at := fmt.Sprintf("Interfaces[%d]", i)
		gi := contract.Interface{Name: in.Name, Address: in.Address, Gateway: in.Gateway}
		if err := gi.Validate(); err != nil {
			bad("%s.%v", at, err)
			continue
		}
		if j, dup := ifnames[in.Name]; dup {
			bad("%s.Name %q: also Interfaces[%d]'s", at, in.Name, j)
		}
		ifnames[in.Name] = i
		// The kernel refuses a default route through a gateway it cannot
		// reach on the link: the device would fail at boot.
		if pfx, gw := netip.MustParsePrefix(in.Address), in.Gateway; gw != "" && !pfx.Masked().Contains(netip.MustParseAddr(gw)) {
			bad("%s.Gateway %q: not in %s, the interface's network", at, gw, pfx.Masked())
		}
	}
	if len(c.Nameservers) > MaxNameservers {
		bad("Nameservers: %d listed, resolvers read the first %d: keep at most %d", len(c.Nameservers), MaxNameservers, MaxNameservers)
	}
	for i, ns := range c.Nameservers {
		// A zone (fe80::1%eth0) is left out: Go's resolver drops such a line.
		if a, err := netip.ParseAddr(ns); err != nil || a.Zone() != "" {
			bad("Nameservers[%d] %q: want an IPv4 or IPv6 address, such as 192.168.1.1", i, ns)
		}
	}
	for i, ns := range c.NTP {
		if err := contract.CheckNTPServer(ns); err != nil {
			bad("NTP[%d]: %v", i, err)
		}
	}
	switch c.RootFSOrDefault() {
	case "erofs", "ext4":
	default:
		bad("RootFS %q: want erofs or ext4", c.RootFS)
	}
	if !slices.Contains(Userlands, c.UserlandOrDefault()) {
		bad("Userland %q: want %s (empty: %s)", c.Userland, strings.Join(Userlands, " or "), UserlandNone)
	}
	if err := c.Update.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Version != "" {
		if err := contract.ValidVersion(c.Version); err != nil {
			bad("Version: %v", err)
		}
	}
	c.validateSlots(bad)
	c.validateGokrazy(bad)
	return errors.Join(errs...)
}

// validateChecker reports through bad what is wrong with the Checker of
// package k, which forwards port (0: none).
func validateChecker(k string, ch *Checker, port int, bad func(string, ...any)) {
	if port == 0 {
		bad("PackageConfig[%q].Checker: needs a ForwardPort (powercut writes and checks through it)", k)
	}
	if !strings.HasPrefix(ch.Values, "/") {
		bad("PackageConfig[%q].Checker.Values %q: want a URL path such as /kv/", k, ch.Values)
	}
	switch {
	case ch.Check == "" && len(ch.Command) == 0:
		bad("PackageConfig[%q].Checker: want Check (a URL path such as /stats) or Command", k)
	case ch.Check != "" && len(ch.Command) != 0:
		bad("PackageConfig[%q].Checker: Check and Command both set; want one", k)
	case ch.Check != "" && !strings.HasPrefix(ch.Check, "/"):
		bad("PackageConfig[%q].Checker.Check %q: want a URL path such as /stats", k, ch.Check)
	case len(ch.Command) != 0 && ch.Command[0] == "":
		bad("PackageConfig[%q].Checker.Command: empty program name", k)
	}
	checkExec(fmt.Sprintf("PackageConfig[%q].Checker.Command", k), ch.Command, bad)
}

// reservedNames are the program names the image keeps for its own
// programs, each with whose it is. A service may not take one: its program
// is built beside them and placed beside them (a service called nvinit was
// built over nvinit, and the image ran it as PID 1). Each is refused
// whether or not this image carries the program, so that a Pool or a
// Userland added later does not make a working config fail.
var reservedNames = map[string]string{
	path.Base(contract.Init):   "nvinit's, the image's PID 1 (" + contract.Init + ")",
	PooldName:                  "poold's, the process pool an image with a Pool carries",
	"poolctl":                  "poolctl's, poold's client",
	contract.PullService:       "nvpull's, the puller an image with Update.Registry carries (" + contract.PullProgram + ")",
	"ld-off2f":                 "the OFF2F loader's (" + contract.Loader + ")",
	path.Base(contract.Loader): "the OFF2F loader's file (" + contract.Loader + ")",
	URootBinary:                "the u-root userland's multi-call binary (" + contract.UserlandDir + "/" + URootBinary + ", Userland u-root)",
}

// URootBinary is the name of the u-root userland's multi-call binary, in
// contract.UserlandDir; every command there is a link to it.
const URootBinary = "bb"

// checkExec reports through bad each string of list that execve would
// refuse (contract.CheckExecString), named field[i].
func checkExec(field string, list []string, bad func(string, ...any)) {
	for i, s := range list {
		if err := contract.CheckExecString(s); err != nil {
			bad("%s[%d] %.80q: %v", field, i, s, err)
		}
	}
}

// checkEnv reports through bad each entry of env that is no environment
// entry (contract.CheckEnv), named field[i].
func checkEnv(field string, env []string, bad func(string, ...any)) {
	for i, e := range env {
		if err := contract.CheckEnv(e); err != nil {
			bad("%s[%d] %.80q: %v", field, i, e, err)
		}
	}
}

// Checked returns the package whose service has a Checker, and its
// Checker; ok is false when none has.
func (c *Config) Checked() (pkg string, ch *Checker, ok bool) {
	for _, p := range c.Packages {
		if ch := c.PackageConfig[p].Checker; ch != nil {
			return p, ch, true
		}
	}
	return "", nil, false
}

// Write is the one canonical writer: indented JSON, defaults left out.
func (c *Config) Write(p string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(p, append(b, '\n'), 0o644)
}
