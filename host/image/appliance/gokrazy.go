package appliance

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nvboot/nvboot/host/image/config"
)

// What a gokrazy instance config asks of the build beyond nvboot's own
// fields (config/gokrazy.go): packages from their gokrazy build directory
// or the module proxy, extra files on the root filesystem, mount points,
// and /perm.

// nvbootModule is the module path of this repository: import paths under
// it are built in ModuleRoot.
const nvbootModule = "github.com/nvboot/nvboot"

// PermLink is /perm on the device, gokrazy's writable partition: a link to
// the state filesystem, so programs written for gokrazy find it there. It
// is in the skeleton (rootfs/skeleton/perm), which every builder installs.
const PermLink = "perm"

// importDir is the directory go build of import path pkg runs in: the
// nvboot module for its own packages; for any other, the gokrazy build
// directory next to the config (builddir/<pkg>, or the nearest parent
// holding a go.mod, as gokrazy looks for it), so the versions the user
// pinned there are the ones built; else a module of its own under the
// scratch directory, made with go get, which fetches the package's module
// at its latest version from the module proxy.
func (b *builder) importDir(ctx context.Context, name, pkg string) (string, error) {
	if pkg == nvbootModule || strings.HasPrefix(pkg, nvbootModule+"/") {
		return b.ModuleRoot, nil
	}
	if b.ConfigDir != "" {
		parts := strings.Split(path.Join("builddir", pkg), "/")
		for i := len(parts); i > 0; i-- {
			dir := filepath.Join(b.ConfigDir, filepath.Join(parts[:i]...))
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
	}
	dir := filepath.Join(b.work, "gomod", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module nvboot.build/"+name+"\n"), 0o644); err != nil {
		return "", err
	}
	b.logf("fetching %s (go get, in a module of its own: no builddir/%s/go.mod beside the config)", pkg, pkg)
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if err := runIn(ctx, dir, env, "go", "get", pkg); err != nil {
		return "", fmt.Errorf("service %s: fetching %s: %w", name, pkg, err)
	}
	return dir, nil
}

// runIn runs a command in dir with env, its output in the error.
func runIn(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// placeGokrazy puts on the root tree what a gokrazy config asks for: the
// mount points of MountDevices and every package's extra files (also of
// PackageConfig entries not in Packages, as gokrazy places them), before
// placeEtc, so that an extra file of the same path wins. An extra
// file never replaces a file the build placed, and nothing is written
// outside the root tree: os.Root refuses a path that leaves it, through
// ".." or a symbolic link an archive made.
func (b *builder) placeGokrazy(st staging) error {
	root, err := os.OpenRoot(st.root)
	if err != nil {
		return err
	}
	defer root.Close()
	for i, m := range b.Config.MountDevices {
		if err := root.MkdirAll(m.Target[1:], 0o755); err != nil {
			return fmt.Errorf("MountDevices[%d].Target %q: %w", i, m.Target, err)
		}
	}
	c := b.Config
	for _, pkg := range sortedKeys(c.PackageConfig) {
		pc := c.PackageConfig[pkg]
		for _, dst := range sortedKeys(pc.ExtraFilePaths) {
			at := fmt.Sprintf("PackageConfig[%q].ExtraFilePaths[%q]", pkg, dst)
			src, kind, err := config.ExtraFileSource(b.ConfigDir, pc.ExtraFilePaths[dst], b.Target.GOARCH())
			if err != nil {
				return fmt.Errorf("%s: %w", at, err)
			}
			switch kind {
			case config.ExtraTar:
				err = untar(root, dst[1:], src)
			case config.ExtraDir:
				err = copyTree(root, dst[1:], src)
			default:
				err = copyInto(root, dst[1:], src)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", at, err)
			}
		}
		for _, dst := range sortedKeys(pc.ExtraFileContents) {
			if err := writeNew(root, dst[1:], 0o644, strings.NewReader(pc.ExtraFileContents[dst])); err != nil {
				return fmt.Errorf("PackageConfig[%q].ExtraFileContents[%q]: %w", pkg, dst, err)
			}
		}
	}
	return nil
}

// gokrazyEtc adds what gokrazy's packer puts in every root beyond what
// every nvboot image has (placeEtc), unless an extra file already did:
// /etc/ssl/ca-bundle.pem, where gokrazy keeps the CA certificates (a link
// to the image's bundle), and /var, a link to /perm/var.
func gokrazyEtc(root *os.Root) error {
	const bundle, certs = "etc/ssl/ca-bundle.pem", "certs/ca-certificates.crt"
	if placed(root, "etc/ssl/"+certs) && !placed(root, bundle) {
		if err := root.Symlink(certs, bundle); err != nil {
			return err
		}
	}
	if !placed(root, "var") {
		return root.Symlink("perm/var", "var")
	}
	return nil
}

// writeNew writes r to the new file name in root, its directory made.
func writeNew(root *os.Root, name string, perm fs.FileMode, r io.Reader) error {
	if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("/%s is already in the image (nvboot's, or another extra file's)", name)
	}
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return root.Chmod(name, perm)
}

// copyInto copies the host file src to name in root, keeping its mode.
func copyInto(root *os.Root, name, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return writeNew(root, name, fi.Mode().Perm(), f)
}

// copyTree copies the host directory src to dir in root: directories,
// regular files and symbolic links.
func copyTree(root *os.Root, dir, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		name := path.Join(dir, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			return root.MkdirAll(name, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return root.Symlink(target, name)
		case d.Type().IsRegular():
			return copyInto(root, name, p)
		}
		return fmt.Errorf("%s: not a file, directory or symbolic link", p)
	})
}

// untar unpacks the tar archive src into dir in root: directories,
// regular files and symbolic links.
func untar(root *os.Root, dir, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", src, err)
		}
		name := path.Join(dir, path.Clean("/" + h.Name)[1:])
		switch h.Typeflag {
		case tar.TypeDir:
			err = root.MkdirAll(name, 0o755)
		case tar.TypeReg:
			err = writeNew(root, name, fs.FileMode(h.Mode).Perm(), tr)
		case tar.TypeSymlink:
			if err = root.MkdirAll(path.Dir(name), 0o755); err == nil {
				err = root.Symlink(h.Linkname, name)
			}
		default:
			err = fmt.Errorf("%s in %s: only directories, files and symbolic links are placed", h.Name, src)
		}
		if err != nil {
			return err
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
