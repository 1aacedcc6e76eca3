package nvbootcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nvboot/nvboot/image/appliance"
	"github.com/nvboot/nvboot/image/config"
)

// moduleRoot finds the nvboot module: nvinit and ld-off2f are built from it.
// -src, else $NVBOOT_SRC, else the module of the current directory.
func moduleRoot(ctx context.Context, flag string) (string, error) {
	if flag == "" {
		flag = os.Getenv("NVBOOT_SRC")
	}
	if flag != "" {
		if _, err := os.Stat(filepath.Join(flag, "cmd", "nvinit")); err != nil {
			return "", fmt.Errorf("-src %s: not an nvboot checkout (no cmd/nvinit)", flag)
		}
		// Absolute: go build and make run in other directories.
		abs, err := filepath.Abs(flag)
		if err != nil {
			return "", fmt.Errorf("-src %s: %w", flag, err)
		}
		return abs, nil
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the nvboot checkout: run nvboot there, or pass -src DIR")
	}
	root := filepath.Dir(mod)
	if _, err := os.Stat(filepath.Join(root, "cmd", "nvinit")); err != nil {
		return "", fmt.Errorf("%s is not the nvboot module: run nvboot in the nvboot checkout, or pass -src DIR", root)
	}
	return root, nil
}

// kernelPath is -kernel, else the config's KernelPath, else $NVBOOT_KERNEL,
// else the cached build of kernel-config/ (built now when missing). It must
// be an x86 bzImage; the error names where it came from and the path.
func kernelPath(ctx context.Context, flag, fromConfig, root string, log io.Writer) (string, error) {
	for _, k := range []struct{ from, path string }{{"-kernel", flag}, {"the config's KernelPath", fromConfig},
		{"$NVBOOT_KERNEL", os.Getenv("NVBOOT_KERNEL")}} {
		if k.path != "" {
			if err := appliance.CheckKernel(k.path); err != nil {
				return "", fmt.Errorf("%s: %w", k.from, err)
			}
			return k.path, nil
		}
	}
	fmt.Fprintf(log, "kernel: kernel-config/build.sh (cached after the first build, about 10 minutes)\n")
	cmd := exec.CommandContext(ctx, filepath.Join(root, "kernel-config", "build.sh"))
	cmd.Stderr = log
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the kernel (kernel-config/build.sh): %w", err)
	}
	k := filepath.Join(strings.TrimSpace(string(out)), "bzImage")
	if err := appliance.CheckKernel(k); err != nil {
		return "", fmt.Errorf("the kernel kernel-config/build.sh built: %w", err)
	}
	return k, nil
}

// progress prints timestamped progress lines to stderr.
type progress struct {
	w     io.Writer
	start time.Time
}

func newProgress(w io.Writer) *progress { return &progress{w: w, start: time.Now()} }

func (p *progress) printf(format string, args ...any) {
	fmt.Fprintf(p.w, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

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
	if in.root, err = moduleRoot(ctx, src); err != nil {
		return nil, err
	}
	fromConfig := in.cfg.KernelPath
	if fromConfig != "" && !filepath.IsAbs(fromConfig) {
		// Relative to the config file, as its local packages are.
		fromConfig = filepath.Join(in.cfgDir, fromConfig)
	}
	if in.kernel, err = kernelPath(ctx, kernel, fromConfig, in.root, log); err != nil {
		return nil, err
	}
	return in, nil
}

// options are the appliance build options for one layout into out.
func (in *inputs) options(l appliance.Layout, out string, logf func(string, ...any)) appliance.Options {
	return appliance.Options{Config: in.cfg, Layout: l, Out: out, Kernel: in.kernel,
		ModuleRoot: in.root, ConfigDir: in.cfgDir, Logf: logf}
}
