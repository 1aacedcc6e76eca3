// Package derive makes the device's configs (image/guest) from an image
// config (image/config): what nvinit and poold of an image read. It is the
// one place the host's shape of a service (config.PackageConfig) is turned
// into the device's (guest.Service, guest.Program); it lives apart from
// image/guest so that the device side, which imports image/guest, does not
// link the host's config.
//
// Design: docs/DESIGN.md#appliance-image-and-boot-path.
package derive

import (
	"fmt"
	"strings"
	"time"

	"github.com/nvboot/nvboot/image/config"
	"github.com/nvboot/nvboot/image/guest"
)

// Options are what the image's layout decides.
type Options struct {
	// BinDir is the directory of the services' executables on the device:
	// guest.BinDir, or guest.DAXBinDir when they live on the text store.
	BinDir string
	// TextStore: the image has a text store for nvinit to mount and
	// provision (guest.TextDevice at guest.TextDir).
	TextStore bool
}

// Configs are the device configs of one image.
type Configs struct {
	// Init is nvinit's config (guest.InitConfigPath).
	Init *guest.InitConfig
	// Poold is poold's config (guest.PooldConfigPath); nil: no service has
	// a Pool, and the image carries no poold.
	Poold *guest.PooldConfig
}

// FromImage derives the device configs of an image built from c: nvinit
// starts poold first when any service is pooled (ready on its socket), then
// the services in c.Packages order, each found by its program name; poold
// keeps one pool per pooled service, with the service's argv and
// environment, which only root (nvinit) may spawn. Both configs are
// validated; the error names the config and every bad field.
func FromImage(c *config.Config, o Options) (*Configs, error) {
	if o.BinDir == "" {
		o.BinDir = guest.BinDir
	}
	path := func(name string) string { return o.BinDir + "/" + name }
	in := &guest.InitConfig{Hostname: c.HostnameOrDefault(),
		State: guest.State{Device: guest.StateDevice, Dir: guest.StateDir, Image: guest.StateImage}}
	for _, n := range c.InterfacesOrDefault() {
		in.Network = append(in.Network, guest.Interface{Name: n.Name, Address: n.Address, Gateway: n.Gateway})
	}
	in.Update = c.Update.Guest()
	if c.Slots == 2 {
		in.Slots = &guest.Slots{TestBootSeconds: int(c.TestBootDeadlineOrDefault() / time.Second)}
	}
	if c.UserlandOrDefault() == config.UserlandURoot {
		in.Shell = guest.UserlandDir + "/" + URootShell
	}
	if o.TextStore {
		in.TextStore = guest.TextStore{Device: guest.TextDevice, Dir: guest.TextDir, Image: guest.StoreImage, Manifest: guest.Manifest}
	}
	var pd *guest.PooldConfig
	if c.Pooled() {
		// poold is a service like the others, started first; a pooled
		// service's spawn that finds no socket yet is retried with the
		// restart backoff.
		in.Services = append(in.Services, guest.Service{Name: config.PooldName, Path: path(config.PooldName),
			Args: []string{"-config", guest.PooldConfigPath}, WaitFor: guest.PooldSocket})
		pd = &guest.PooldConfig{Socket: guest.PooldSocket}
	}
	for _, pkg := range c.Packages {
		name, pc := c.ProgramName(pkg), c.PackageConfig[pkg]
		sv := guest.Service{Name: name, Path: path(name), Args: pc.CommandLineFlags, Env: pc.Environment,
			WaitFor: pc.WaitFor.Ready(), DontStart: pc.DontStart, StartAfter: pc.StartAfter()}
		if c.FromGokrazy() {
			// Run as gokrazy runs it: the first start marked, exit 125
			// stops it, HOME in /perm/home; and, as gokrazy's init, a
			// program that exits 0 is done, not restarted.
			sv.Gokrazy, sv.Restart = true, guest.RestartOnFailure
		}
		if pl := pc.Pool; pl != nil {
			sv.Pool = name
			pd.Programs = append(pd.Programs, guest.Program{Name: name, Path: path(name),
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
			in.Mounts = append(in.Mounts, guest.Mount{Source: m.Source, Type: m.Type, Target: m.Target, Options: m.Options})
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
// console: gosh, built without its line editor (docs/DESIGN.md, "u-root
// userland").
const URootShell = "gosh"

// Service is the nvinit service called name, nil if there is none.
func (c *Configs) Service(name string) *guest.Service {
	for i := range c.Init.Services {
		if c.Init.Services[i].Name == name {
			return &c.Init.Services[i]
		}
	}
	return nil
}
