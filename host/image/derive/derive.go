package derive

import (
	"fmt"
	"strings"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
)

// Options are what the image's layout decides.
type Options struct {
	// BinDir is the directory of the services' executables on the device:
	// contract.BinDir, or contract.DAXBinDir when they live on the text store.
	BinDir string
	// TextStore: the image has a text store for nvinit to mount and
	// provision (contract.TextDevice at contract.TextDir).
	TextStore bool
	// StateDevice is the state's block device when it is not pmem1 (a
	// Raspberry Pi card's data partition), mounted without DAX; "":
	// contract.StateDevice, dax=always.
	StateDevice string
	// SlotFirmware is the Slots' Firmware (contract.FirmwareTryboot on a
	// Pi); "": UEFI.
	SlotFirmware string
	// NoRTC: the board has no real-time clock (a Pi), so NTP defaults to
	// config.DefaultNTP.
	NoRTC bool
}

// Configs are the device configs of one image.
type Configs struct {
	// Init is nvinit's config (contract.InitConfigPath).
	Init *contract.InitConfig
	// Poold is poold's config (contract.PooldConfigPath); nil: no service has
	// a Pool, and the image carries no poold.
	Poold *contract.PooldConfig
}

// FromImage derives the device configs of an image built from c: nvinit
// starts poold first when any service is pooled (ready on its socket), then
// the services in c.Packages order, each found by its program name; poold
// keeps one pool per pooled service, with the service's argv and
// environment, which only root (nvinit) may spawn. Both configs are
// validated; the error names the config and every bad field.
func FromImage(c *config.Config, o Options) (*Configs, error) {
	if o.BinDir == "" {
		o.BinDir = contract.BinDir
	}
	path := func(name string) string { return o.BinDir + "/" + name }
	in := &contract.InitConfig{Hostname: c.HostnameOrDefault(),
		State: contract.State{Device: contract.StateDevice, Dir: contract.StateDir, Image: contract.StateImage}}
	if o.StateDevice != "" {
		// A card: pheap flushes through msync there (pheap's "msync" mode).
		in.State.Device, in.State.Options = o.StateDevice, "defaults"
	}
	for _, n := range c.InterfacesOrDefault() {
		in.Network = append(in.Network, contract.Interface{Name: n.Name, Address: n.Address, Gateway: n.Gateway})
	}
	in.Update = c.Update.Guest()
	in.Clock.NTP = c.NTPOrDefault(o.NoRTC)
	// The puller installs a change of services through the deploy path
	// (the text store; on a Pi card, whose image nvboot push publishes
	// with its programs whole, the state) and anything else through the
	// A/B update (Slots): an image with neither could install nothing it
	// pulls.
	if in.Pull = c.Update.GuestPull(); in.Pull != nil && !o.TextStore && o.StateDevice == "" && c.Slots != 2 {
		return nil, fmt.Errorf("Update.Registry: this image could install nothing it pulls: its layout has no text store (a service's change is deployed into it) and it has no Slots 2 (anything else is an A/B update); use the off2f layout or Slots 2")
	}
	if c.Slots == 2 {
		in.Slots = &contract.Slots{TestBootSeconds: int(c.TestBootDeadlineOrDefault() / time.Second), Firmware: o.SlotFirmware}
	}
	if c.UserlandOrDefault() == config.UserlandURoot {
		in.Shell = contract.UserlandDir + "/" + URootShell
	}
	if o.TextStore {
		in.TextStore = contract.TextStore{Device: contract.TextDevice, Dir: contract.TextDir, Image: contract.StoreImage, Manifest: contract.Manifest}
	}
	var pd *contract.PooldConfig
	if c.Pooled() {
		// poold is a service like the others, started first; a pooled
		// service's spawn that finds no socket yet is retried with the
		// restart backoff.
		in.Services = append(in.Services, contract.Service{Name: config.PooldName, Path: path(config.PooldName),
			Args: []string{"-config", contract.PooldConfigPath}, WaitFor: contract.PooldSocket})
		pd = &contract.PooldConfig{Socket: contract.PooldSocket}
	}
	for _, pkg := range c.Packages {
		name, pc := c.ProgramName(pkg), c.PackageConfig[pkg]
		sv := contract.Service{Name: name, Path: path(name), Args: pc.CommandLineFlags, Env: pc.Environment,
			WaitFor: pc.WaitFor.Ready(), DontStart: pc.DontStart, StartAfter: pc.StartAfter()}
		if c.FromGokrazy() {
			// Run as gokrazy runs it: the first start marked, exit 125
			// stops it, HOME in /perm/home; and, as gokrazy's init, a
			// program that exits 0 is done, not restarted.
			sv.Gokrazy, sv.Restart = true, contract.RestartOnFailure
		}
		if pl := pc.Pool; pl != nil {
			sv.Pool = name
			pd.Programs = append(pd.Programs, contract.Program{Name: name, Path: path(name),
				Args: pc.CommandLineFlags, Env: pc.Environment, MinIdle: pl.MinIdle, MaxIdle: pl.MaxIdle,
				IdleTimeout: pl.IdleTimeout, MaxUses: pl.MaxUses, Prefault: pl.Prefault,
				Allow: []string{"uid:0"}})
		}
		in.Services = append(in.Services, sv)
	}
	for _, m := range c.MountDevices {
		// Sources by PARTUUID= or label are warned about (config.Ignored)
		// and left out: nvinit has no udev to resolve them.
		if strings.HasPrefix(m.Source, "/dev/") {
			in.Mounts = append(in.Mounts, contract.Mount{Source: m.Source, Type: m.Type, Target: m.Target, Options: m.Options})
		}
	}
	if err := in.Validate(); err != nil {
		return nil, fmt.Errorf("nvinit config: %w", err)
	}
	if pd != nil {
		if err := pd.Validate(); err != nil {
			return nil, fmt.Errorf("poold config: %w", err)
		}
	}
	return &Configs{Init: in, Poold: pd}, nil
}

// URootShell is the command of the u-root userland nvinit runs on the
// console: gosh, built without its line editor (host/image/appliance's
// package documentation, "u-root userland").
const URootShell = "gosh"

// Service is the nvinit service called name, nil if there is none.
func (c *Configs) Service(name string) *contract.Service {
	for i := range c.Init.Services {
		if c.Init.Services[i].Name == name {
			return &c.Init.Services[i]
		}
	}
	return nil
}
