package nvbootcmd

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	kernelpkg "github.com/nvboot/nvboot/host/kernel"
	"github.com/nvboot/nvboot/internal/checkout"
)

// inputs are what every command that builds images takes: the image config
// (the demo when no file is given), the directory its local packages are
// relative to, the nvboot checkout and the kernel.
type inputs struct {
	cfg    *config.Config
	cfgDir string
	root   string
	kernel string
	target config.Target
}

// loadInputs reads the config (cfgPath; "": the demo), chooses its target
// (arch: -arch, "" for the config's own) and says which and why, first;
// then, for a Raspberry Pi, what its image is; then the config's warnings,
// worded for that target. It finds the checkout (-src) and the kernel of
// the target (-kernel, then the config's, then the usual places; none for
// a Pi, whose kernel is its kernel package's). For a command that boots
// what it builds (boot), a target nvboot cannot boot is refused first.
func loadInputs(ctx context.Context, cfgPath, src, kernel, arch string, boot bool, log io.Writer) (*inputs, error) {
	in := &inputs{cfg: config.Demo()}
	var warnings []string
	if cfgPath != "" {
		cfg, w, err := config.LoadWarn(cfgPath)
		if err != nil {
			return nil, err
		}
		in.cfg, in.cfgDir, warnings = cfg, filepath.Dir(cfgPath), w
		if in.cfgDir, err = filepath.Abs(in.cfgDir); err != nil {
			return nil, fmt.Errorf("-config %s: %w", cfgPath, err)
		}
	}
	ch, err := in.cfg.ChooseTarget(arch)
	if err != nil {
		if cfgPath != "" {
			return nil, fmt.Errorf("config %s: %w", cfgPath, err)
		}
		return nil, err
	}
	in.target = ch.Target
	fmt.Fprintln(log, ch)
	if ch.Target == config.TargetRPi && !boot {
		fmt.Fprintln(log, appliance.RPiImage) // what the image will be
	}
	// Once each, before anything is built: what a gokrazy config asks
	// that nvboot does not do, and keys it does not know.
	for _, w := range in.cfg.Retarget(warnings, ch.Target) {
		fmt.Fprintf(log, "config %s: warning: %s\n", cfgPath, w)
	}
	if boot {
		if err := appliance.Bootable(ch.Target); err != nil {
			return nil, fmt.Errorf("an image %w", err)
		}
	}
	if in.root, err = checkout.Root(ctx, src); err != nil {
		return nil, err
	}
	if ch.Target == config.TargetRPi {
		if kernel != "" {
			return nil, fmt.Errorf("-kernel %s: a Raspberry Pi boots its kernel package's kernel (%s) from the card's boot partition; leave -kernel out", kernel, in.cfg.KernelPackageOrDefault())
		}
		return in, nil // the kernel comes with the Pi's parts (host/image/rpi)
	}
	fromConfig := in.cfg.KernelPath
	if fromConfig != "" && !filepath.IsAbs(fromConfig) {
		// Relative to the config file, as its local packages are.
		fromConfig = filepath.Join(in.cfgDir, fromConfig)
	}
	// -kernel, then the config's KernelPath, then the usual places; built
	// now when missing.
	karch, err := kernelpkg.ArchForGOARCH(ch.Target.GOARCH())
	if err != nil {
		return nil, err
	}
	in.kernel, err = kernelpkg.Find(ctx, kernelpkg.Lookup{Paths: []kernelpkg.Source{{From: "-kernel", Path: kernel},
		{From: "the config's KernelPath", Path: fromConfig}}, Root: in.root, Build: true, Log: log, Arch: karch})
	if err != nil {
		return nil, err
	}
	return in, nil
}

// options are the appliance build options for one layout into out.
func (in *inputs) options(l appliance.Layout, out string, logf func(string, ...any)) appliance.Options {
	o := appliance.Options{Config: in.cfg, Layout: l, Out: out, Kernel: in.kernel,
		ModuleRoot: in.root, ConfigDir: in.cfgDir, Logf: logf, Target: in.target}
	if in.target == config.TargetRPi {
		o.Board = appliance.BoardRPi
	}
	return o
}
