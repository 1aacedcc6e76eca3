package appliance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/off2f"
)

const nvinitPackage = "github.com/nvboot/nvboot/cmd/nvinit"

// pooldPackage is built into images with pooled services.
const pooldPackage = "github.com/nvboot/nvboot/cmd/poold"

// program is one executable of the image, built on the host.
type program struct {
	Name    string // program name: nvinit, or the service's
	Package string // as in the config
	Bin     string // the built ELF
	Text    uint64 // bytes of read-only PT_LOADs
	// Path is where a program that is not a service goes in the guest
	// (the userland's binary); empty: nvinit's or the service's place.
	Path string
	// Links are the names the program runs as, each a link to it in
	// Path's directory (the userland's commands).
	Links []string
	// Role is the program's role in a pushed artifact when Path is set;
	// "": contract.RoleUserland.
	Role string
}

// buildPrograms is the second phase: it builds nvinit, every service and
// the userland (userland.go) into work/bin, and in the off2f layout
// ld-off2f, whose path it returns.
func (b *builder) buildPrograms(ctx context.Context) ([]program, string, error) {
	progs, err := b.goPrograms(ctx)
	if err != nil {
		return nil, "", err
	}
	ul, err := b.userland(ctx)
	if err != nil {
		return nil, "", err
	}
	pl, err := b.puller(ctx) // pull.go
	if err != nil {
		return nil, "", err
	}
	for _, p := range []*program{ul, pl} {
		if p == nil {
			continue
		}
		if p.Text, err = off2f.ReadOnlyBytes(p.Bin); err != nil {
			return nil, "", fmt.Errorf("reading %s: %w", p.Name, err)
		}
		progs = append(progs, *p)
	}
	loader := filepath.Join(b.work, "ld-off2f")
	if b.Layout == OFF2F {
		// The Makefile's ARCH: the host's gcc for the host's machine, the
		// cross gcc for another (make loader-arm64 does the same).
		arch := b.Target.GOARCH()
		b.logf("building ld-off2f (%s)", arch)
		if err := run(ctx, nil, "make", "-s", "-C", filepath.Join(b.ModuleRoot, "loader"), "ARCH="+arch, "OUT="+loader); err != nil {
			return nil, "", fmt.Errorf("building ld-off2f: %w", err)
		}
		if err := checkMachine("ld-off2f", loader, arch); err != nil {
			return nil, "", err
		}
	}
	return progs, loader, nil
}

// goPrograms builds nvinit and every service into work/bin: nvinit first,
// then poold if a service is pooled, then the services in Packages order.
func (b *builder) goPrograms(ctx context.Context) ([]program, error) {
	out := filepath.Join(b.work, "bin")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	progs := []program{{Name: "nvinit", Bin: filepath.Join(out, "nvinit")}}
	b.logf("building nvinit")
	if err := b.goBuild(ctx, "nvinit", nvinitPackage, nil, nil, progs[0].Bin); err != nil {
		return nil, err
	}
	pkgs := b.Config.Packages
	if b.Config.Pooled() {
		// poold is a service like the others, started first; a pooled
		// service's spawn that finds no socket yet is retried with the
		// restart backoff.
		pkgs = append([]string{pooldPackage}, pkgs...)
	}
	for _, pkg := range pkgs {
		name := b.Config.ProgramName(pkg)
		p := program{Name: name, Package: pkg, Bin: filepath.Join(out, name)}
		b.logf("building %s (%s)", name, pkg)
		if err := b.buildService(ctx, name, pkg, p.Bin); err != nil { // service.go
			return nil, err
		}
		progs = append(progs, p)
	}
	for i := range progs {
		n, err := off2f.ReadOnlyBytes(progs[i].Bin)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", progs[i].Name, err)
		}
		progs[i].Text = n
	}
	return progs, nil
}
