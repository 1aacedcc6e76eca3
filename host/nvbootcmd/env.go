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
}

// loadInputs reads the config (cfgPath; "": the demo) and finds the checkout
// (-src) and the kernel (-kernel, then the config's, then the usual places).
func loadInputs(ctx context.Context, cfgPath, src, kernel string, log io.Writer) (*inputs, error) {
	in := &inputs{cfg: config.Demo()}
	if cfgPath != "" {
		cfg, warnings, err := config.LoadWarn(cfgPath)
		if err != nil {
			return nil, err
		}
		// Once each, before anything is built: what a gokrazy config asks
		// that nvboot does not do, and keys it does not know.
		for _, w := range warnings {
			fmt.Fprintf(log, "config %s: warning: %s\n", cfgPath, w)
		}
		in.cfg, in.cfgDir = cfg, filepath.Dir(cfgPath)
		if in.cfgDir, err = filepath.Abs(in.cfgDir); err != nil {
			return nil, fmt.Errorf("-config %s: %w", cfgPath, err)
		}
	}
	var err error
	if in.root, err = checkout.Root(ctx, src); err != nil {
		return nil, err
	}
	fromConfig := in.cfg.KernelPath
	if fromConfig != "" && !filepath.IsAbs(fromConfig) {
		// Relative to the config file, as its local packages are.
		fromConfig = filepath.Join(in.cfgDir, fromConfig)
	}
	// -kernel, then the config's KernelPath, then the usual places; built
	// now when missing.
	in.kernel, err = kernelpkg.Find(ctx, kernelpkg.Lookup{Paths: []kernelpkg.Source{{From: "-kernel", Path: kernel},
		{From: "the config's KernelPath", Path: fromConfig}}, Root: in.root, Build: true, Log: log})
	if err != nil {
		return nil, err
	}
	return in, nil
}

// options are the appliance build options for one layout into out.
func (in *inputs) options(l appliance.Layout, out string, logf func(string, ...any)) appliance.Options {
	return appliance.Options{Config: in.cfg, Layout: l, Out: out, Kernel: in.kernel,
		ModuleRoot: in.root, ConfigDir: in.cfgDir, Logf: logf}
}
