package appliance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/off2f"
)

// BuildService builds one service of o.Config, found by its program name,
// as the off2f layout does (the same go build, the same note but no
// fallback directory: a deployed text has no copy on the root filesystem),
// and returns it converted. It is what `nvboot deploy` sends; o.Out and
// o.Kernel are not used. It converts (off2f.Convert) rather than installs
// (off2f.Install): the bytes go over the network, and the appliance writes
// them, text first, header file last, as Install does.
func BuildService(ctx context.Context, o Options, name string) (*off2f.Converted, error) {
	o.Layout = OFF2F // linked as the off2f layout links (goBuild)
	raw, target, err := buildOne(ctx, o, name)
	if err != nil {
		return nil, err
	}
	conv, err := off2f.Convert(raw, off2f.Options{Loader: contract.Loader, StoreDir: contract.TextDir, Arch: target.GOARCH()})
	if err != nil {
		return nil, fmt.Errorf("converting %s to OFF2F: %w", name, err)
	}
	return conv, nil
}

// BuildServiceELF builds one service of o.Config as the elf layout does: a
// whole static program, what `nvboot deploy` sends to an image without a
// text store.
func BuildServiceELF(ctx context.Context, o Options, name string) ([]byte, error) {
	o.Layout = ELF
	raw, _, err := buildOne(ctx, o, name)
	return raw, err
}

// buildOne builds service name of o.Config with o.Layout's link flags
// for the config's target, and returns the program and the target.
func buildOne(ctx context.Context, o Options, name string) ([]byte, config.Target, error) {
	pkg := ""
	for _, p := range o.Config.Packages {
		if o.Config.ProgramName(p) == name {
			pkg = p
		}
	}
	if pkg == "" {
		return nil, "", fmt.Errorf("service %q: not in the config's Packages (its name is the last element of the package path, or its Basename)", name)
	}
	if o.Config.PackageConfig[pkg].Pool != nil {
		return nil, "", fmt.Errorf("service %s: started through poold (Pool), whose programs cannot be deployed yet", name)
	}
	ch, err := o.Config.ChooseTarget(string(o.Target))
	if err != nil {
		return nil, "", fmt.Errorf("config: %w", err)
	}
	o.Target = ch.Target
	work, err := os.MkdirTemp("", "nvboot-deploy-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(work)
	b := &builder{Options: o, work: work}
	bin := filepath.Join(work, name)
	b.logf("building %s (%s)", name, pkg)
	if err := b.buildService(ctx, name, pkg, bin); err != nil {
		return nil, "", err
	}
	raw, err := os.ReadFile(bin)
	return raw, o.Target, err
}

// buildService builds service pkg (program name) into dst as every image
// build does: its GoBuildFlags after its build tags, its environment.
func (b *builder) buildService(ctx context.Context, name, pkg, dst string) error {
	flags := b.Config.PackageConfig[pkg].GoBuildFlags
	if tags := b.Config.BuildTags(pkg); len(tags) > 0 {
		flags = append([]string{"-tags=" + strings.Join(tags, ",")}, flags...)
	}
	return b.goBuild(ctx, name, pkg, flags, b.Config.BuildEnv(pkg), dst)
}
