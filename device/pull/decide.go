package pull

import (
	"fmt"
	"strings"

	"github.com/nvboot/nvboot/device/contract"
)

// Device is what the decision needs to know of the running appliance.
type Device struct {
	Arch    string // GOARCH
	Base    string // the booted root's (contract.BasePath)
	Version string // the running image's; "": none
	// Slots: the appliance was built with Slots 2 (an A/B update can
	// replace its whole image).
	Slots bool
	// TextStore: deploys have a text store to go into. ELFStore: the
	// image has none (the elf layout), and whole programs go into its
	// state.
	TextStore, ELFStore bool
	// Services are the image's services, by name.
	Services map[string]Service
}

// Service is one service of the running appliance.
type Service struct {
	// Deployable: neither pooled nor DontStart (what the deploy path
	// takes).
	Deployable bool
	// Header is the digest of the header file it runs (sha256:<hex>, as
	// a layer names it); "": not known (a program deployed by someone
	// else), so it is deployed again, which restarts nothing when it is
	// the same.
	Header string
}

// Decision is what to do about a pulled image.
type Decision struct {
	// Path is contract.PullDeploy or PullUpdate; "": the appliance runs
	// the image already.
	Path string
	// Deploy are the services whose program differs (PullDeploy).
	Deploy []Program
	// Why says in a few words why this path.
	Why string
}

// RefusedError is an image the appliance will not install, and why; it is
// not tried again until the tag moves.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

func refuse(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// Decide says how the appliance dev installs im, or refuses it: an image
// for another architecture; a lower version than the running one unless
// allowDowngrade; a change of anything but services (another base) on an
// appliance without A/B slots. With the same base only the services'
// programs differ, and those whose header file differs from what runs go
// through the deploy path, if every one of them can; otherwise (and for
// any other base) the A/B update replaces the whole image.
func Decide(im *Image, dev Device, allowDowngrade bool) (Decision, error) {
	if im.Arch != dev.Arch {
		return Decision{}, refuse("image %s is built for %s, this appliance is %s", short(im.Digest), im.Arch, dev.Arch)
	}
	switch {
	case dev.Version == "" || allowDowngrade:
	case im.Version == "":
		return Decision{}, refuse("image %s has no version, the appliance runs %s: an image without one cannot be ordered (push with -version, or allow downgrades: Update.Registry.AllowDowngrade)", short(im.Digest), dev.Version)
	default:
		c, err := contract.CompareVersions(im.Version, dev.Version)
		if err != nil {
			return Decision{}, refuse("image %s: %v", short(im.Digest), err)
		}
		if c < 0 {
			return Decision{}, refuse("image %s is version %s, lower than the running %s: a downgrade is refused (Update.Registry.AllowDowngrade allows it)", short(im.Digest), im.Version, dev.Version)
		}
	}
	abOrRefuse := func(why string) (Decision, error) {
		if !dev.Slots {
			return Decision{}, refuse("image %s %s, which only an A/B update installs, and this appliance has no slots (build it with Slots 2, or flash the new image)", short(im.Digest), why)
		}
		if im.Root == nil || len(im.Boot) != 2 || im.ImageID == "" {
			return Decision{}, refuse("image %s %s, but it has no root filesystem, two boot partitions and an image id for an A/B update (was it built with Slots 2?)", short(im.Digest), why)
		}
		return Decision{Path: contract.PullUpdate, Why: why}, nil
	}
	if im.Base != dev.Base {
		return abOrRefuse("changes more than services (its base differs: the kernel, the root filesystem, nvinit or the services' settings)")
	}
	if !dev.TextStore && !dev.ELFStore {
		return abOrRefuse("changes services, and this appliance has no text store to deploy them into (nor, without one, a state)")
	}
	var d Decision
	var notDeployable []string
	for _, p := range im.Programs {
		if p.Role != contract.RoleService {
			continue
		}
		if p.ELF != dev.ELFStore {
			// The same base is the same layout: not this appliance's kind.
			return Decision{}, refuse("image %s has %s as %s, and this appliance deploys %s: not an image of this appliance", short(im.Digest), p.Name,
				map[bool]string{true: "a whole static program", false: "an OFF2F program"}[p.ELF],
				map[bool]string{true: "whole static programs into its state", false: "OFF2F programs into its text store"}[dev.ELFStore])
		}
		sv, ok := dev.Services[p.Name]
		if !ok {
			// The same base has the same nvinit config: this is not an
			// image of this appliance's kind.
			return Decision{}, refuse("image %s has a service %s this appliance does not have, with the same base: not an image of this appliance", short(im.Digest), p.Name)
		}
		if sv.Header == p.Header.Digest.String() {
			continue
		}
		if !sv.Deployable {
			notDeployable = append(notDeployable, p.Name)
		}
		d.Deploy = append(d.Deploy, p)
	}
	if len(notDeployable) > 0 {
		return abOrRefuse("changes " + strings.Join(notDeployable, ", ") + ", which the deploy path cannot replace (pooled or DontStart)")
	}
	if len(d.Deploy) > 0 {
		names := make([]string, len(d.Deploy))
		for i, p := range d.Deploy {
			names[i] = p.Name
		}
		d.Path, d.Why = contract.PullDeploy, "only services changed: "+strings.Join(names, ", ")
	}
	return d, nil
}

// short is a digest for a person: its algorithm and 12 hex digits.
func short(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
