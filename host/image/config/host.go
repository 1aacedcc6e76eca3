package config

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
// the unified kernel image of an amd64 image from (EFIStub).
const DefaultEFIStub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

// EFIStub is systemd's EFI stub for goarch's UEFI (the same paths on
// Fedora and Arch): linuxx64 for amd64, linuxaa64 for arm64.
func EFIStub(goarch string) string {
	if goarch == "arm64" {
		return "/usr/lib/systemd/boot/efi/linuxaa64.efi.stub"
	}
	return DefaultEFIStub
}

// crossPrefixes are the GNU triplets' prefixes of the tools that build
// for a GOARCH other than the host's (Debian's gcc-TRIPLET and
// binutils-TRIPLET, the triplet's underscores as dashes).
var crossPrefixes = map[string]string{"amd64": "x86_64-linux-gnu-", "arm64": "aarch64-linux-gnu-"}

// CrossTool is the binutils or gcc program name (gcc, objcopy) that works
// on goarch's code on this host: the plain one for the host's own
// machine, else the cross one, with its Debian package.
func CrossTool(name, goarch string) Tool {
	pkg := name
	if name != "gcc" {
		pkg = "binutils"
	}
	if goarch == runtime.GOARCH {
		return Tool{Name: name, Package: pkg}
	}
	p := crossPrefixes[goarch]
	return Tool{Name: p + name, Package: pkg + "-" + strings.ReplaceAll(strings.TrimSuffix(p, "-"), "_", "-")}
}

// Needs are the parts of a build that only some layouts and targets make.
type Needs struct {
	// RootImage: a root filesystem image (every layout but initramfs).
	RootImage bool
	// Loader: ld-off2f, built from C (the off2f layout).
	Loader bool
	// Target is the image's; empty: the config's own (ChooseTarget "").
	Target Target
	// EFIStub is the EFI stub to look for; empty: EFIStub of the target's
	// GOARCH.
	EFIStub string
}

// Tools are what a build of c that makes n runs: the filesystem tools,
// objcopy and the EFI stub for the unified kernel image of a UEFI target,
// go, and make and gcc for ld-off2f; gcc and objcopy the cross ones for
// a target of another machine than the host's, and the stub its machine's
// (on a Debian amd64 host, systemd-boot-efi:arm64 for arm64: dpkg
// --add-architecture arm64). ci/deps.sh installs them all.
func (c *Config) Tools(n Needs) []Tool {
	if n.Target == "" {
		ch, _ := c.ChooseTarget("")
		n.Target = cmp.Or(ch.Target, TargetPC)
	}
	goarch := n.Target.GOARCH()
	t := []Tool{{Name: "go"}, {Name: "mke2fs", Package: "e2fsprogs"}, {Name: "debugfs", Package: "e2fsprogs"},
		{Name: "mkfs.vfat", Package: "dosfstools"}, {Name: "mcopy", Package: "mtools"}}
	if n.Target != TargetRPi {
		stub := Tool{Name: cmp.Or(n.EFIStub, EFIStub(goarch)), Package: "systemd-boot-efi", File: true}
		if goarch != runtime.GOARCH {
			stub.Package += ":" + goarch
		}
		t = append(t, CrossTool("objcopy", goarch), stub)
	}
	if n.RootImage && c.RootFSOrDefault() == "erofs" {
		t = append(t, Tool{Name: "mkfs.erofs", Package: "erofs-utils"})
	}
	if n.Loader {
		t = append(t, Tool{Name: "make", Package: "make"}, CrossTool("gcc", goarch))
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
	// The config's own target: -arch may build another, whose tarballs
	// the build looks for again.
	ch, _ := c.ChooseTarget("")
	for _, k := range sortedKeys(c.PackageConfig) {
		for _, dst := range sortedKeys(c.PackageConfig[k].ExtraFilePaths) {
			if _, _, err := ExtraFileSource(dir, c.PackageConfig[k].ExtraFilePaths[dst], ch.Target.GOARCH()); err != nil {
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
	if c.Update.Pulls() {
		if err := c.Update.Registry.checkFiles(dir); err != nil { // registry.go
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
