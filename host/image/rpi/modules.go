package rpi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/host/image/config"
)

// DefaultVersions pin the modules of the default packages
// (config.DefaultKernelPackage, ...) when the config's instance pins none
// (builddir/PKG/go.mod): an nvboot release builds the same Pi parts until
// this table changes.
var DefaultVersions = map[string]string{
	config.DefaultKernelPackage:   "v0.0.0-20251127164438-9778ec0261de", // Linux 6.12.47 (raspberrypi/linux stable_20250916)
	config.DefaultFirmwarePackage: "v0.0.0-20260522070551-527ce0ed43cf",
	config.DefaultEEPROMPackage:   "v0.0.0-20260518070910-95f7328a8228",
}

// Module is one of the Pi's packages, fetched.
type Module struct {
	// Package is the Go package the config names; its directory holds
	// the files.
	Package string
	// Path and Version are its module's; Version is "" for a module
	// replaced by a local directory.
	Path, Version string
	// Dir is the package's directory: in the module cache, or the local
	// replacement.
	Dir string
	// Pinned says where Version came from: the instance's go.mod, or
	// nvboot's DefaultVersions.
	Pinned string
}

// Parts are the Pi packages of an image.
type Parts struct {
	Kernel *Module
	// Firmware and EEPROM are nil when the config turns them off ("").
	Firmware, EEPROM *Module
}

// Fetch resolves and downloads the config's KernelPackage, FirmwarePackage
// and EEPROMPackage (gokrazy's defaults when unset) into the module
// cache, as gokrazy does, with go mod download -json. Each module's
// version is the one the gokrazy instance pins (the require in the go.mod
// of configDir/builddir/PKG, or the nearest directory up holding one,
// where gok add puts it; a replace there with a local directory is used as
// it is), else DefaultVersions'; a package neither pins is an error naming
// it. The module proxy is GOPROXY's, as for every go build.
func Fetch(ctx context.Context, c *config.Config, configDir string, logf func(string, ...any)) (*Parts, error) {
	p := &Parts{}
	kernel := c.KernelPackageOrDefault()
	if kernel == "" {
		return nil, fmt.Errorf(`KernelPackage "": a Raspberry Pi image needs a kernel (leave it out for %s)`, config.DefaultKernelPackage)
	}
	for _, f := range []struct {
		field, pkg string
		m          **Module
	}{
		{"KernelPackage", kernel, &p.Kernel},
		{"FirmwarePackage", c.FirmwarePackageOrDefault(), &p.Firmware},
		{"EEPROMPackage", c.EEPROMPackageOrDefault(), &p.EEPROM},
	} {
		if f.pkg == "" {
			continue
		}
		m, err := fetch(ctx, f.pkg, configDir)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", f.field, f.pkg, err)
		}
		if logf != nil {
			logf("%s: %s@%s (%s)", f.field, m.Path, m.Version, m.Pinned)
		}
		*f.m = m
	}
	return p, nil
}

// goModJSON is what go mod edit -json says of a go.mod.
type goModJSON struct {
	Require []struct{ Path, Version string }
	Replace []struct {
		Old struct{ Path, Version string }
		New struct{ Path, Version string }
	}
}

// fetch resolves one package's module and downloads it.
func fetch(ctx context.Context, pkg, configDir string) (*Module, error) {
	m, err := pinned(ctx, pkg, configDir)
	if err != nil {
		return nil, err
	}
	if m.Dir != "" { // a local replacement
		return m, checkDir(m)
	}
	out, err := goCmd(ctx, os.TempDir(), "mod", "download", "-json", m.Path+"@"+m.Version)
	var dl struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &dl); jerr == nil && dl.Error != "" {
		return nil, fmt.Errorf("go mod download %s@%s (%s): %s", m.Path, m.Version, m.Pinned, dl.Error)
	}
	if err != nil {
		return nil, fmt.Errorf("go mod download %s@%s (%s): %w", m.Path, m.Version, m.Pinned, err)
	}
	if dl.Dir == "" {
		return nil, fmt.Errorf("go mod download %s@%s: no directory in its answer: %s", m.Path, m.Version, out)
	}
	m.Dir = filepath.Join(dl.Dir, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(pkg, m.Path), "/")))
	return m, checkDir(m)
}

func checkDir(m *Module) error {
	if st, err := os.Stat(m.Dir); err != nil || !st.IsDir() {
		return fmt.Errorf("package directory %s: not in module %s (%v)", m.Dir, m.Path, err)
	}
	return nil
}

// pinned finds the module of pkg and its version: from the instance's
// builddir go.mod, else DefaultVersions.
func pinned(ctx context.Context, pkg, configDir string) (*Module, error) {
	if configDir != "" {
		parts := strings.Split(path.Join("builddir", pkg), "/")
		for i := len(parts); i > 0; i-- {
			dir := filepath.Join(configDir, filepath.Join(parts[:i]...))
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
				continue
			}
			out, err := goCmd(ctx, dir, "mod", "edit", "-json")
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, "go.mod"), err)
			}
			var gm goModJSON
			if err := json.Unmarshal(out, &gm); err != nil {
				return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, "go.mod"), err)
			}
			m := &Module{Package: pkg, Pinned: filepath.Join(dir, "go.mod")}
			for _, r := range gm.Require {
				if (pkg == r.Path || strings.HasPrefix(pkg, r.Path+"/")) && len(r.Path) > len(m.Path) {
					m.Path, m.Version = r.Path, r.Version
				}
			}
			if m.Path == "" {
				return nil, fmt.Errorf("%s requires no module holding it (gok add %s, or remove that go.mod)", m.Pinned, pkg)
			}
			for _, r := range gm.Replace {
				if r.Old.Path == m.Path && (r.Old.Version == "" || r.Old.Version == m.Version) && r.New.Version == "" {
					// A local directory, as gok add . writes for one's own kernel.
					local := r.New.Path
					if !filepath.IsAbs(local) {
						local = filepath.Join(dir, local)
					}
					m.Version = ""
					m.Dir = filepath.Join(local, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(pkg, m.Path), "/")))
				}
			}
			return m, nil
		}
	}
	if v, ok := DefaultVersions[pkg]; ok {
		return &Module{Package: pkg, Path: pkg, Version: v, Pinned: "nvboot's default"}, nil
	}
	return nil, fmt.Errorf("no version pinned: nvboot pins only %s, %s and %s; pin this one in builddir/%s/go.mod beside the config (gok add)",
		config.DefaultKernelPackage, config.DefaultFirmwarePackage, config.DefaultEEPROMPackage, pkg)
}

// goCmd runs the go command in dir outside any workspace, returning its
// standard output; the error carries its standard error.
func goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
