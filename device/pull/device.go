package pull

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/nvboot/nvboot/device/contract"
)

// path is a device path under Root.
func (p *Puller) path(dev string) string { return filepath.Join(p.Root, filepath.FromSlash(dev)) }

// readLine is the first line of the device file f; "" when it has none.
func (p *Puller) readLine(f string) string {
	b, err := os.ReadFile(p.path(f))
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}

// device says what the decision needs of the running appliance: its base
// and version as booted (the version nvpull last installed, when that is
// known and the root is the same), and what each service runs.
func (p *Puller) device() (Device, error) {
	d := Device{Arch: p.Arch, Base: p.readLine(contract.BasePath), Version: p.readLine(contract.VersionPath),
		Slots: p.Init.Slots != nil, TextStore: p.Init.TextStore.Device != "", Services: map[string]Service{}}
	d.ELFStore = !d.TextStore && p.Init.State.Device != ""
	if d.Base == "" {
		return d, fmt.Errorf("%s: missing or empty: this image does not say its base, so nothing pulled can be compared with it (rebuild it)", contract.BasePath)
	}
	if r := p.st.Status.Running; r != nil && r.Version != "" {
		d.Version = r.Version
	}
	for _, sv := range p.Init.Services {
		s := Service{Deployable: sv.Pool == "" && !sv.DontStart}
		h, err := p.runs(sv)
		if err != nil {
			return d, err
		}
		s.Header = h
		d.Services[sv.Name] = s
	}
	return d, nil
}

// runs is the digest of the header file service sv runs: its image's
// program when the store has no link for it (or the link names that
// program), the one nvpull deployed when the link names that; "" when
// the link names a program nvpull did not deploy.
func (p *Puller) runs(sv contract.Service) (string, error) {
	prog := sv.Path
	if t, err := os.Readlink(p.path(p.link(sv.Name))); err == nil {
		prog = t
	}
	if d, ok := p.st.Services[sv.Name]; ok && d.Program == prog {
		return d.Header, nil
	}
	if prog != sv.Path {
		return "", nil
	}
	f, err := os.Open(p.path(prog))
	if err != nil {
		return "", fmt.Errorf("service %s: its program: %w", sv.Name, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("service %s: reading its program: %w", sv.Name, err)
	}
	return digest.NewDigestFromBytes(digest.SHA256, h.Sum(nil)).String(), nil
}

// deployedStill reports whether every service nvpull deployed still runs
// what it deployed (a store provisioned again, or another deploy, makes
// the running image unknown again).
func (p *Puller) deployedStill() bool {
	for name, d := range p.st.Services {
		t, err := os.Readlink(p.path(p.link(name)))
		if err != nil || t != d.Program {
			return false
		}
	}
	return true
}

// link is service name's link on the device: in the text store, or, in an
// image without one, in the deploy store on the state.
func (p *Puller) link(name string) string {
	if p.Init.TextStore.Device == "" {
		return filepath.Join(p.Init.State.DirOrDefault(), contract.ELFDeploySubdir, "services", name)
	}
	return filepath.Join(contract.ServicesDir, name)
}
