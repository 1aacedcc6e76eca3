package appliance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
)

// The u-root userland (config.UserlandURoot): u-root's core commands, built
// in busybox mode by gobusybox's makebb, the tool u-root's own `u-root`
// command builds its images with (through mkuimage's "bb" builder). makebb
// rewrites each command's package main into a package that registers the
// command, and links them all into one binary that runs the command its
// argv[0] names. nvboot runs makebb as a tool, from the module proxy, at
// the version u-root's go.mod requires; it copies none of its code.
// The package documentation has the reasons ("u-root userland").
const (
	urootModule = "github.com/u-root/u-root"
	urootCore   = urootModule + "/cmds/core"
	makebbPkg   = "github.com/u-root/gobusybox/src/cmd/makebb"
	// urootBinary is the multi-call binary's name in contract.UserlandDir;
	// every command there is a link to it.
	urootBinary = config.URootBinary
	// urootTags: goshsmall builds gosh without its line editor, which
	// waits for a terminal's answers a serial console never gives (see
	// the design doc); gosh then reads and runs one line at a time.
	urootTags = "goshsmall"
)

// urootLeftOut are core commands the appliance does not take: nvinit is
// init, and poweroff, shutdown and reboot go through it (its /sbin links),
// which stops the services and unmounts first; u-root's call reboot(2)
// at once.
var urootLeftOut = []string{"init", "poweroff", "shutdown"}

// userland builds the image's userland into work/bin, nil for none.
func (b *builder) userland(ctx context.Context) (*program, error) {
	if b.Config.UserlandOrDefault() != config.UserlandURoot {
		return nil, nil
	}
	bin := filepath.Join(b.work, "bin", urootBinary)
	cmds, err := b.buildURoot(ctx, bin)
	if err != nil {
		return nil, fmt.Errorf("Userland %q: %w", config.UserlandURoot, err)
	}
	return &program{Name: urootBinary, Package: urootModule, Bin: bin,
		Path: contract.UserlandDir + "/" + urootBinary, Links: cmds}, nil
}

// buildURoot builds u-root's core commands as one binary at dst and
// returns their names. It works in a module of its own that requires the
// u-root version nvboot's go.mod has (for pkg/cpio), so the commands and
// makebb's own dependencies are what that release was tested with. The
// binary is the same bytes for the same inputs (makebb builds with
// -trimpath, stripped, no build id), and is kept in the cache under a key of
// those inputs: makebb takes a minute on two cores.
func (b *builder) buildURoot(ctx context.Context, dst string) ([]string, error) {
	version, err := goOutput(ctx, b.ModuleRoot, nil, "list", "-m", "-f", "{{.Version}}", urootModule)
	if err != nil {
		return nil, fmt.Errorf("which u-root nvboot's go.mod requires: %w", err)
	}
	dir := filepath.Join(b.work, "userland")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	gomod := fmt.Sprintf("module nvboot.build/userland\n\ngo 1.24\n\nrequire %s %s\n", urootModule, version)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		return nil, err
	}
	goarch := b.Target.GOARCH()
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	b.logf("userland: u-root %s core commands (go list, from the module proxy)", version)
	list, err := goOutput(ctx, dir, env, "list", "-e", "-f", `{{if and (eq .Name "main") (not .Error)}}{{.ImportPath}}{{end}}`, urootCore+"/...")
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", urootCore, err)
	}
	var pkgs, names []string
	for _, p := range strings.Fields(list) {
		if n := path.Base(p); path.Dir(p) == urootCore && !slices.Contains(urootLeftOut, n) {
			pkgs, names = append(pkgs, p), append(names, n)
		}
	}
	if !slices.Contains(names, "gosh") {
		return nil, fmt.Errorf("%s@%s has no gosh among its core commands %q", urootModule, version, names)
	}
	// The imports keep the commands' and makebb's modules in go.mod and
	// go.sum, where go mod tidy puts them.
	var tools strings.Builder
	tools.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	for _, p := range append([]string{makebbPkg}, pkgs...) {
		fmt.Fprintf(&tools, "\t_ %q\n", p)
	}
	tools.WriteString(")\n")
	if err := os.WriteFile(filepath.Join(dir, "tools.go"), []byte(tools.String()), 0o644); err != nil {
		return nil, err
	}
	if err := runIn(ctx, dir, env, "go", "mod", "tidy"); err != nil {
		return nil, err
	}
	goVersion, err := goOutput(ctx, dir, env, "env", "GOVERSION")
	if err != nil {
		return nil, err
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256([]byte(strings.Join([]string{goVersion, gomod, tools.String(), string(sum), urootTags, "GOARCH=" + goarch}, "\x00")))
	cached, err := userlandCache(hex.EncodeToString(key[:16]))
	if err == nil {
		if err := copyFile(dst, cached, 0o755); err == nil {
			b.logf("userland: %d commands, cached %s", len(names), cached)
			return names, nil
		}
	}
	b.logf("userland: building makebb and %d commands in busybox mode (about a minute)", len(names))
	makebb := filepath.Join(dir, "makebb")
	// makebb runs here: built for the host; the binary it builds, for
	// the target (env's GOARCH).
	if err := runIn(ctx, dir, append(env, "GOARCH="+runtime.GOARCH), "go", "build", "-trimpath", "-o", makebb, makebbPkg); err != nil {
		return nil, err
	}
	// makebb finds go in GOROOT, which it asks its own runtime for; that
	// is empty in a -trimpath binary.
	goroot, err := goOutput(ctx, dir, env, "env", "GOROOT")
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, makebb, append([]string{"-go-build-tags", urootTags, "-gen-dir", filepath.Join(dir, "gen"), "-o", dst}, pkgs...)...)
	cmd.Dir, cmd.Env = dir, append(env, "GOROOT="+goroot)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("makebb (%d commands of %s %s): %w\n%s", len(pkgs), urootModule, version, err, strings.TrimSpace(string(out)))
	}
	if cached != "" {
		// A cache that cannot be written costs the next build a minute,
		// nothing else.
		if err := os.MkdirAll(filepath.Dir(cached), 0o755); err == nil {
			tmp := cached + ".tmp" + fmt.Sprint(os.Getpid())
			if copyFile(tmp, dst, 0o755) == nil {
				os.Rename(tmp, cached)
			}
			os.Remove(tmp)
		}
	}
	return names, nil
}

// userlandCache is where a userland binary with this key is cached:
// $NVBOOT_CACHE/userland, else the user's cache directory's nvboot/userland,
// as for the kernel.
func userlandCache(key string) (string, error) {
	root := os.Getenv("NVBOOT_CACHE")
	if root == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		root = filepath.Join(c, "nvboot")
	}
	return filepath.Join(root, "userland", key, urootBinary), nil
}

// goOutput runs go in dir and returns its standard output, trimmed.
func goOutput(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = dir, env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
