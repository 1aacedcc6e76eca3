package contract

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nvboot/nvboot/format/bootmark"
)

// InitConfig is what nvinit reads at boot (InitConfigPath). `nvboot build`
// writes it from the image config; the shape follows gokrazy's so it reads
// the same.
type InitConfig struct {
	// Hostname is set with sethostname; empty leaves the kernel's.
	Hostname string `json:",omitempty"`
	// Services are started in this order.
	Services []Service `json:",omitempty"`
	// TextStore is the OFF2F text store on pmem; no Device: none.
	TextStore TextStore `json:",omitzero"`
	// State is the read-write state filesystem; no Device: none.
	State State `json:",omitzero"`
	// Network configures interfaces with static IPv4 addresses before the
	// services start; loopback is always brought up.
	Network []Interface `json:",omitempty"`
	// Poweroff powers the machine off once every service has exited and none
	// will restart: a test image ends by itself.
	Poweroff bool `json:",omitempty"`
	// Update is the update endpoint (`nvboot deploy`); nil: none.
	Update *Update `json:",omitempty"`
	// Mounts are mounted after the state, before the services start; one
	// that fails is retried in the background (gokrazy's MountDevices).
	Mounts []Mount `json:",omitempty"`
	// KernelRegion is the pmem region the firmware copies the kernel from;
	// nil: none.
	KernelRegion *KernelRegion `json:",omitempty"`
	// Slots is set in an image with A/B slots (`nvboot update`): nvinit
	// runs the test boot (mounts efivarfs, arms the watchdog, commits or
	// reboots); nil: one root.
	Slots *Slots `json:",omitempty"`
	// Pull makes nvinit start nvpull (PullProgram), which polls a
	// registry for the image's updates and installs them through the
	// update endpoint; nil: none.
	Pull *Pull `json:",omitempty"`
	// Shell is run on the console, restarted when it exits, in images
	// with a userland (the image config's Userland); nvinit then takes its
	// own commands (poweroff, reboot, start NAME) from CommandFIFO, which
	// its links in /sbin write to, instead of reading the console, which
	// is the shell's. Empty: no shell, nvinit reads the console.
	Shell string `json:",omitempty"`
	// Clock is the image's floor for the clock and its NTP servers
	// (clock.go); zero: no floor, no NTP (the time saved on the state is
	// still kept).
	Clock Clock `json:",omitzero"`
}

// KernelRegion is the kernel kept uncompressed on pmem (format/kernelpmem).
// When the firmware booted the card's kernel instead (nvboot.kernel=card),
// nvinit writes Image onto Device once the services are up, so the next
// boot copies the kernel from memory.
type KernelRegion struct {
	Device string // the region's block device, e.g. /dev/pmem2
	Image  string // the uncompressed kernel on the root filesystem
	SHA256 string // Image's, in hex: a root whose copy differs is not written
}

// Validate checks the paths and the hash's form.
func (k *KernelRegion) Validate() error {
	var v validator
	if !filepath.IsAbs(k.Device) {
		v.badf("Device %q: want an absolute path", k.Device)
	}
	if !filepath.IsAbs(k.Image) {
		v.badf("Image %q: want an absolute path", k.Image)
	}
	if b, err := hex.DecodeString(k.SHA256); err != nil || len(b) != 32 {
		v.badf("SHA256 %q: want 64 hex digits", k.SHA256)
	}
	return v.err()
}

// Service is one supervised program.
type Service struct {
	// Name prefixes the service's console lines and names it in markers: a
	// word of letters, digits, '-', '_', '.'.
	Name string
	// Path is the absolute path of the program.
	Path string
	// Args are the arguments after argv[0] (which is Path).
	Args []string `json:",omitempty"`
	// Env is added to the base environment, as KEY=VALUE.
	Env []string `json:",omitempty"`
	// WaitFor marks the service ready when it answers: a TCP "host:port",
	// "tcp:PORT" (127.0.0.1:PORT, as the image config writes it) or an
	// absolute unix socket path; empty: ready once started. A TCP port is
	// the service's alone: no other service's WaitFor, nor the update
	// endpoint, may have it.
	WaitFor string `json:",omitempty"`
	// Restart is "always" (default), "on-failure" or "never".
	Restart string `json:",omitempty"`
	// DontStart keeps the service configured but not started.
	DontStart bool `json:",omitempty"`
	// Pool names the service's program in poold's config: the service is
	// started by activating a process poold parked (poold itself being an
	// earlier service with WaitFor its socket); empty: fork and exec.
	Pool string `json:",omitempty"`
	// StartAfter holds the service's first start until each condition
	// holds: StartClock, StartNetRoute, StartNetOnline (gokrazy's WaitFor
	// and WaitForClock).
	StartAfter []string `json:",omitempty"`
	// Gokrazy runs the program as gokrazy's init runs one:
	// GOKRAZY_FIRST_START=1 in its first start's environment, exit status
	// 125 (gokrazy.DontStartOnBoot) stops it without a restart, HOME is
	// /perm/home/NAME (made, and the working directory) and USER root.
	Gokrazy bool `json:",omitempty"`
}

// Restart policies.
const (
	RestartAlways    = "always"
	RestartOnFailure = "on-failure"
	RestartNever     = "never"
)

// RestartOrDefault returns the restart policy, "always" when unset.
func (s *Service) RestartOrDefault() string { return cmp.Or(s.Restart, RestartAlways) }

// TextStore is where the OFF2F text files live, and how to refill it.
type TextStore struct {
	// Device is the block device of the fsdax namespace, e.g. /dev/pmem0.
	Device string `json:",omitempty"`
	// Namespace is the nvdimm namespace behind Device ("namespace0.0"); empty:
	// derived from a /dev/pmemN[.M] Device. A raw namespace is switched to fsdax.
	Namespace string `json:",omitempty"`
	// FSType is the filesystem type; default "ext4".
	FSType string `json:",omitempty"`
	// Options are the mount data; default "dax=always"; "defaults": none.
	Options string `json:",omitempty"`
	// Dir is the mount point; default /nv/text.
	Dir string `json:",omitempty"`
	// Image is the store filesystem image on the root filesystem, copied onto
	// Device when the store is blank or stale.
	Image string `json:",omitempty"`
	// Manifest is the image's MANIFEST on the root filesystem; the store is
	// current when its own MANIFEST lists the same hashes.
	Manifest string `json:",omitempty"`
}

// State is the read-write filesystem for service state. nvinit writes a
// filesystem onto Device only when every byte of it reads as zero (blank: a
// fresh device) or it holds nothing but an interrupted provisioning of Image;
// a device that does not mount and holds anything else is left as it is.
type State struct {
	// Device is the block device, e.g. /dev/pmem1.
	Device string `json:",omitempty"`
	// Namespace is the nvdimm namespace behind Device ("namespace1.0"); empty:
	// derived from a /dev/pmemN[.M] Device. A raw namespace is switched to
	// fsdax only when it is blank: the switch moves the data start.
	Namespace string `json:",omitempty"`
	// Image is the gzip-compressed state filesystem template on the root
	// filesystem, written onto a blank Device; empty: a blank device stays
	// blank.
	Image string `json:",omitempty"`
	// FSType is the filesystem type; default "ext4".
	FSType string `json:",omitempty"`
	// Options are the mount data; default "dax=always" (pheap wants DAX);
	// "defaults": none, for a state device without DAX.
	Options string `json:",omitempty"`
	// Dir is the mount point; default /nv/state.
	Dir string `json:",omitempty"`
}

// Interface is a static IPv4 setting for one network interface.
type Interface struct {
	// Name is the kernel's name, e.g. eth0.
	Name string
	// Address is the address with its prefix length, e.g. 10.0.2.15/24.
	Address string
	// Gateway is the default route's next hop; empty: no default route.
	Gateway string `json:",omitempty"`
}

// Defaults of TextStore and State.
const (
	DefaultFSType  = "ext4"
	DefaultOptions = "dax=always"
)

func (t *TextStore) FSTypeOrDefault() string  { return cmp.Or(t.FSType, DefaultFSType) }
func (t *TextStore) OptionsOrDefault() string { return mountData(t.Options) }
func (t *TextStore) DirOrDefault() string     { return cmp.Or(t.Dir, TextDir) }
func (s *State) FSTypeOrDefault() string      { return cmp.Or(s.FSType, DefaultFSType) }
func (s *State) OptionsOrDefault() string     { return mountData(s.Options) }
func (s *State) DirOrDefault() string         { return cmp.Or(s.Dir, StateDir) }

// NamespaceOrDefault names the nvdimm namespace of the store: see pmemNamespace.
func (t *TextStore) NamespaceOrDefault() string { return pmemNamespace(t.Device, t.Namespace) }

// NamespaceOrDefault names the nvdimm namespace of the state: see pmemNamespace.
func (s *State) NamespaceOrDefault() string { return pmemNamespace(s.Device, s.Namespace) }

// pmemNamespace is namespace when set, else the namespace the kernel names
// /dev/pmemN (namespaceN.0) or /dev/pmemN.M (namespaceN.M); empty when
// neither says.
func pmemNamespace(device, namespace string) string {
	if namespace != "" {
		return namespace
	}
	n, ok := strings.CutPrefix(device, "/dev/pmem")
	if !ok || n == "" {
		return ""
	}
	region, sub, dotted := strings.Cut(n, ".")
	if !digits(region) || dotted && !digits(sub) {
		return ""
	}
	if !dotted {
		sub = "0"
	}
	return "namespace" + region + "." + sub
}

// mountData turns Options into mount(2) data: "" is the default, and
// "defaults" (as in fstab) is no options at all.
func mountData(o string) string {
	switch o {
	case "":
		return DefaultOptions
	case "defaults":
		return ""
	}
	return o
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// ParseInitConfig decodes and validates an InitConfig.
func ParseInitConfig(b []byte) (*InitConfig, error) {
	var c InitConfig
	if err := decode(b, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks every field and names each one that is wrong.
func (c *InitConfig) Validate() error {
	var v validator
	if err := c.Clock.Validate(); err != nil {
		v.badf("Clock: %v", err)
	}
	if c.Hostname != "" && !ValidHostname(c.Hostname) {
		v.badf("Hostname %q: letters, digits and '-', up to 63", c.Hostname)
	}
	names := map[string]int{}
	for i, s := range c.Services {
		at := fmt.Sprintf("Services[%d]", i)
		if !bootmark.IsWord(s.Name) {
			v.badf("%s.Name %q: a word of letters, digits, '-', '_', '.' (up to 64)", at, s.Name)
		} else if j, dup := names[s.Name]; dup {
			v.badf("%s.Name %q: also Services[%d]'s", at, s.Name, j)
		} else {
			names[s.Name] = i
		}
		if !filepath.IsAbs(s.Path) {
			v.badf("%s.Path %q: want an absolute path", at, s.Path)
		} else if err := CheckExecString(s.Path); err != nil {
			v.badf("%s.Path %.80q: %v", at, s.Path, err)
		}
		checkExec(&v, at+".Args", s.Args)
		checkEnv(&v, at+".Env", s.Env)
		if s.WaitFor != "" && !validWaitFor(s.WaitFor) {
			v.badf("%s.WaitFor %q: want a TCP host:port or an absolute unix socket path", at, s.WaitFor)
		}
		for _, cond := range s.StartAfter {
			if !slices.Contains(StartConditions, cond) {
				v.badf("%s.StartAfter %q: want one of %s", at, cond, strings.Join(StartConditions, ", "))
			}
		}
		switch s.RestartOrDefault() {
		case RestartAlways, RestartOnFailure, RestartNever:
		default:
			v.badf("%s.Restart %q: want always, on-failure or never", at, s.Restart)
		}
	}
	c.validatePorts(&v)
	if c.Shell != "" && !filepath.IsAbs(c.Shell) {
		v.badf("Shell %q: want an absolute path", c.Shell)
	}
	for i, m := range c.Mounts {
		if err := m.Validate(); err != nil {
			v.badf("Mounts[%d].%v", i, err)
		}
	}
	for i, in := range c.Network {
		if err := in.Validate(); err != nil {
			v.badf("Network[%d].%v", i, err)
		}
	}
	if c.KernelRegion != nil {
		if err := c.KernelRegion.Validate(); err != nil {
			v.badf("KernelRegion.%v", err)
		}
	}
	t := &c.TextStore
	if t.Device != "" {
		if !filepath.IsAbs(t.Device) {
			v.badf("TextStore.Device %q: want an absolute path", t.Device)
		}
		if t.Image == "" || !filepath.IsAbs(t.Image) {
			v.badf("TextStore.Image %q: want the absolute path of the store image", t.Image)
		}
		if t.Manifest == "" || !filepath.IsAbs(t.Manifest) {
			v.badf("TextStore.Manifest %q: want the absolute path of the image manifest", t.Manifest)
		}
		if !validNamespace(t.Namespace) {
			v.badf("TextStore.Namespace %q: want an nvdimm namespace name like namespace0.0", t.Namespace)
		}
		if !ExtFamily(t.FSTypeOrDefault()) {
			v.badf("TextStore.FSType %q: provisioning writes ext2/3/4 images only (it reads their size from the superblock)", t.FSType)
		}
	} else if *t != (TextStore{}) {
		v.badf("TextStore.Device: empty while other TextStore fields are set")
	}
	if !filepath.IsAbs(t.DirOrDefault()) {
		v.badf("TextStore.Dir %q: want an absolute path", t.Dir)
	}
	s := &c.State
	if s.Device != "" && !filepath.IsAbs(s.Device) {
		v.badf("State.Device %q: want an absolute path", s.Device)
	} else if s.Device == "" && *s != (State{}) {
		v.badf("State.Device: empty while other State fields are set")
	}
	if s.Image != "" && !filepath.IsAbs(s.Image) {
		v.badf("State.Image %q: want the absolute path of the gzip-compressed state image", s.Image)
	}
	if !validNamespace(s.Namespace) {
		v.badf("State.Namespace %q: want an nvdimm namespace name like namespace1.0", s.Namespace)
	}
	if s.Image != "" && !ExtFamily(s.FSTypeOrDefault()) {
		v.badf("State.FSType %q: provisioning from State.Image writes ext2/3/4 images only", s.FSType)
	}
	if !filepath.IsAbs(s.DirOrDefault()) {
		v.badf("State.Dir %q: want an absolute path", s.Dir)
	}
	if t.Device != "" && s.Device != "" && filepath.Clean(t.Device) == filepath.Clean(s.Device) {
		v.badf("State.Device %q: also TextStore.Device (text and state must be apart)", s.Device)
	} else if ns := s.NamespaceOrDefault(); ns != "" && ns == t.NamespaceOrDefault() {
		v.badf("State.Namespace %q: also TextStore's namespace (text and state must be apart)", ns)
	}
	if filepath.Clean(t.DirOrDefault()) == filepath.Clean(s.DirOrDefault()) {
		v.badf("State.Dir %q: also TextStore.Dir", s.DirOrDefault())
	}
	if c.Update != nil {
		if err := c.Update.Validate(); err != nil {
			v.errs = append(v.errs, err)
		}
	}
	if c.Slots != nil {
		if err := c.Slots.Validate(); err != nil {
			v.errs = append(v.errs, err)
		}
	}
	if c.Pull != nil {
		if err := c.Pull.Validate(); err != nil {
			v.errs = append(v.errs, err)
		}
		if s.Device == "" {
			v.badf("Pull: the config has no State: nvpull keeps its downloads and its state there")
		}
		if j, dup := names[PullService]; dup {
			v.badf("Services[%d].Name %q: the name is nvpull's (Pull is set)", j, PullService)
		}
	}
	return v.err()
}

// validatePorts refuses two listeners on one TCP port: the update
// endpoint's (nvinit listens on every address) and each service's, known
// by its TCP WaitFor. A WaitFor's port is taken whatever its address: the
// service may well listen on ":PORT", every address. Of two on one port
// the second cannot bind, and nvinit's readiness dial of it is answered by
// the first: a service that never started looks ready.
func (c *InitConfig) validatePorts(v *validator) {
	owner := map[int]string{}
	claim := func(port int, field string) {
		if first, taken := owner[port]; taken {
			v.badf("%s: port %d is also %s: two listeners cannot share a port", field, port, first)
			return
		}
		owner[port] = field
	}
	if u := c.Update; u != nil && u.Port >= 0 && u.Port <= 65535 {
		field := fmt.Sprintf("Update.Port %d", u.Port)
		if u.Port == 0 {
			field = fmt.Sprintf("Update.Port (unset: %d)", DefaultUpdatePort)
		}
		claim(u.PortOrDefault(), field+", the update endpoint's")
	}
	for i, s := range c.Services {
		if port, ok := waitForPort(s.WaitFor); ok {
			claim(port, fmt.Sprintf("Services[%d].WaitFor %q", i, s.WaitFor))
		}
	}
}

// waitForPort is the TCP port of a WaitFor; ok false for none, a unix
// socket or a malformed one (Validate says what is wrong with it).
func waitForPort(w string) (int, bool) {
	if w == "" {
		return 0, false
	}
	network, addr := WaitForAddr(w)
	if network != "tcp" {
		return 0, false
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(p)
	return n, err == nil && n > 0 && n < 65536
}

// Validate checks an interface setting; the error starts with the field's
// name (the caller prefixes where the interface is).
func (in Interface) Validate() error {
	if in.Name == "" || len(in.Name) > 15 {
		return fmt.Errorf("Name %q: an interface name of 1 to 15 bytes", in.Name)
	}
	if p, err := netip.ParsePrefix(in.Address); err != nil || !p.Addr().Is4() {
		return fmt.Errorf("Address %q: want IPv4 with a prefix length, e.g. 10.0.2.15/24", in.Address)
	}
	if in.Gateway != "" {
		if g, err := netip.ParseAddr(in.Gateway); err != nil || !g.Is4() {
			return fmt.Errorf("Gateway %q: want an IPv4 address", in.Gateway)
		}
	}
	return nil
}

// validNamespace: empty (derived from the device) or an nvdimm namespace name.
func validNamespace(ns string) bool { return ns == "" || strings.HasPrefix(ns, "namespace") }

func validWaitFor(w string) bool {
	network, addr := WaitForAddr(w)
	if network == "unix" {
		return true
	}
	_, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	return err == nil && perr == nil && n > 0 && n < 65536
}

// WaitForAddr turns a Service's WaitFor into what net.Dial takes.
func WaitForAddr(w string) (network, addr string) {
	if strings.HasPrefix(w, "/") {
		return "unix", w
	}
	if port, ok := strings.CutPrefix(w, "tcp:"); ok {
		return "tcp", net.JoinHostPort("127.0.0.1", port)
	}
	return "tcp", w
}

// ExtFamily reports whether fstype is one nvinit's provisioning can write.
func ExtFamily(fstype string) bool { return fstype == "ext2" || fstype == "ext3" || fstype == "ext4" }
