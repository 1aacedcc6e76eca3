package config

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The checks of what a config names on the build host: its local package
// directories, its kernel, and the tools a build runs. Load runs them, so a
// config that cannot build fails before anything is compiled.

// Tool is a host program a build runs (or, with File, a file it reads) and
// the Debian package that provides it; no Package: Go itself.
type Tool struct {
	Name, Package string
	File          bool
}

// DefaultEFIStub is systemd's EFI stub for x86-64, which the build makes
// the unified kernel image from.
const DefaultEFIStub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

// Needs are the parts of a build that only some layouts make.
type Needs struct {
	// RootImage: a root filesystem image (every layout but initramfs).
	RootImage bool
	// Loader: ld-off2f, built from C (the off2f layout).
	Loader bool
	// EFIStub is the EFI stub to look for; empty: DefaultEFIStub.
	EFIStub string
}

// Tools are what a build of c that makes n runs: the filesystem tools,
// objcopy and the EFI stub for the unified kernel image, go, and make and
// gcc for ld-off2f. ci/deps.sh installs them all.
func (c *Config) Tools(n Needs) []Tool {
	t := []Tool{{Name: "go"}, {Name: "mke2fs", Package: "e2fsprogs"}, {Name: "debugfs", Package: "e2fsprogs"},
		{Name: "mkfs.vfat", Package: "dosfstools"}, {Name: "mcopy", Package: "mtools"},
		{Name: "objcopy", Package: "binutils"}, {Name: cmp.Or(n.EFIStub, DefaultEFIStub), Package: "systemd-boot-efi", File: true}}
	if n.RootImage && c.RootFSOrDefault() == "erofs" {
		t = append(t, Tool{Name: "mkfs.erofs", Package: "erofs-utils"})
	}
	if n.Loader {
		t = append(t, Tool{Name: "make", Package: "make"}, Tool{Name: "gcc", Package: "gcc"})
	}
	return t
}

// CheckTools reports every tool of tools that is missing, each with the
// Debian package that has it, and the command that installs them.
func CheckTools(tools []Tool) error {
	var missing, pkgs []string
	for _, t := range tools {
		var err error
		if t.File {
			_, err = os.Stat(t.Name)
		} else {
			_, err = exec.LookPath(t.Name)
		}
		if err == nil {
			continue
		}
		if t.Package == "" {
			missing = append(missing, t.Name+" (Go: https://go.dev/dl)")
			continue
		}
		missing = append(missing, fmt.Sprintf("%s (Debian package %s)", t.Name, t.Package))
		if !slices.Contains(pkgs, t.Package) {
			pkgs = append(pkgs, t.Package)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	msg := "the build needs tools that are not installed: " + strings.Join(missing, ", ")
	if len(pkgs) > 0 {
		msg += "; install them with make deps, or apt-get install " + strings.Join(pkgs, " ")
	}
	return errors.New(msg)
}

// IsLocal reports whether a Packages entry is a directory ("./svc",
// "/src/svc") rather than a Go import path.
func IsLocal(pkg string) bool {
	return strings.HasPrefix(pkg, "./") || strings.HasPrefix(pkg, "../") || filepath.IsAbs(pkg) || pkg == "."
}

// CheckPaths checks what the config names on the host, relative to dir
// (the config file's directory): each local package is a directory, and
// KernelPath, if set, a file; each ExtraFilePaths source is found
// (ExtraFileSource). Every failure is reported, named by its field.
func (c *Config) CheckPaths(dir string) error {
	var errs []error
	for i, pkg := range c.Packages {
		if !IsLocal(pkg) {
			continue // an import path: go build finds it, or says why not
		}
		p := pkg
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if fi, err := os.Stat(p); err != nil {
			errs = append(errs, fmt.Errorf("Packages[%d] %q: %w", i, pkg, err))
		} else if !fi.IsDir() {
			errs = append(errs, fmt.Errorf("Packages[%d] %q: %s is not a directory", i, pkg, p))
		}
	}
	for _, k := range sortedKeys(c.PackageConfig) {
		for _, dst := range sortedKeys(c.PackageConfig[k].ExtraFilePaths) {
			if _, _, err := ExtraFileSource(dir, c.PackageConfig[k].ExtraFilePaths[dst]); err != nil {
				errs = append(errs, fmt.Errorf("PackageConfig[%q].ExtraFilePaths[%q]: %w", k, dst, err))
			}
		}
	}
	if k := c.KernelPath; k != "" {
		if !filepath.IsAbs(k) {
			k = filepath.Join(dir, k)
		}
		if fi, err := os.Stat(k); err != nil {
			errs = append(errs, fmt.Errorf("KernelPath %q: %w", c.KernelPath, err))
		} else if fi.IsDir() {
			errs = append(errs, fmt.Errorf("KernelPath %q: %s is a directory, not a bzImage", c.KernelPath, k))
		}
	}
	return errors.Join(errs...)
}
