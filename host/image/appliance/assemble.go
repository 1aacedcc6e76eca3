package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/kernel"
	"github.com/nvboot/nvboot/off2f"
)

// AssembleOptions say what Assemble writes from a root tree that another
// build system filled: Buildroot's TARGET_DIR, Yocto's IMAGE_ROOTFS.
type AssembleOptions struct {
	// Root is the target tree as the builders' hooks leave it: the
	// programs converted to OFF2F, their texts in /lib/off2f,
	// /etc/nvboot/MANIFEST, nvinit's /etc/nvboot/config.json.
	Root string
	// Out is the output directory, as for Build.
	Out string
	// Kernel is the bzImage for the unified kernel image; "" with InPlace.
	Kernel string
	// InPlace writes the provisioning copies (the text store and state
	// filesystem images) into Root itself and only the pmem images into
	// Out: for a builder that makes the root filesystem and disk itself
	// (Yocto's wic). Otherwise Root is copied and left as it is, and Out
	// gets everything Build writes.
	InPlace bool
	// KernelCmdline is added to the kernel command line, as the image
	// config's (a later root= wins: root=PARTLABEL=root on a board).
	KernelCmdline string
	// TextStoreMiB and StateMiB as in the image config (0: the defaults).
	TextStoreMiB, StateMiB int
	Logf                   func(format string, args ...any)
}

// Assemble writes the pmem images, and unless InPlace the root filesystem,
// the disk image, bzImage and image.json, from o.Root with Build's own
// phases (textStore, state, disk): for the same tree the same bytes as
// Build. It reads the hostname from nvinit's config in the tree (the
// filesystem uuids derive from it) and the texts the MANIFEST lists from
// /lib/off2f.
func Assemble(ctx context.Context, o AssembleOptions) (*Image, error) {
	if o.Root == "" || o.Out == "" {
		return nil, errors.New("assemble: a root tree and an output directory are needed")
	}
	for _, n := range []int{o.TextStoreMiB, o.StateMiB} {
		if n < 0 || n%2 != 0 {
			return nil, fmt.Errorf("pmem filesystem size %d MiB: a positive multiple of 2 (or 0: the default)", n)
		}
	}
	if !o.InPlace {
		if err := kernel.Check(o.Kernel); err != nil {
			return nil, fmt.Errorf("kernel: %w", err)
		}
	}
	var ic contract.InitConfig
	raw, err := os.ReadFile(filepath.Join(o.Root, contract.InitConfigPath[1:]))
	if err == nil {
		err = json.Unmarshal(raw, &ic)
	}
	if err != nil {
		return nil, fmt.Errorf("root tree %s: nvinit's config %s: %w", o.Root, contract.InitConfigPath, err)
	}
	hashes, err := off2f.ReadManifest(filepath.Join(o.Root, contract.Manifest[1:]))
	if err != nil {
		return nil, fmt.Errorf("root tree %s: %w (convert the programs first: rootfs/off2f-programs.sh)", o.Root, err)
	}
	// Only what the image's filesystems and command line depend on: the
	// services are in the tree already.
	cfg := &config.Config{Hostname: ic.Hostname, TextStoreMiB: o.TextStoreMiB, StateMiB: o.StateMiB, KernelCmdline: o.KernelCmdline}
	if o.Out, err = AbsOut(o.Out); err != nil {
		return nil, err
	}
	if err := CheckOut(o.Out); err != nil {
		return nil, err
	}
	// The Buildroot and Yocto trees are x86-64's (their defconfig and
	// machine).
	opts := Options{Config: cfg, Layout: OFF2F, Out: o.Out, Logf: o.Logf, Target: config.TargetPC}
	for _, w := range cfg.Rounded() {
		opts.logf("warning: %s", w)
	}
	if !o.InPlace {
		opts.Kernel = absPath(o.Kernel)
	}
	tmp, unlock, err := startBuild(o.Out, opts.logf)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	b := &builder{Options: opts, dir: tmp, work: filepath.Join(tmp, ".work")}
	st := staging{root: o.Root, store: filepath.Join(b.work, "store"), esp: filepath.Join(b.work, "esp")}
	if !o.InPlace {
		st.root = filepath.Join(b.work, "root")
		if err := copyRootTree(st.root, o.Root); err != nil {
			return nil, fmt.Errorf("copying the root tree %s: %w", o.Root, err)
		}
	}
	// The store holds what the MANIFEST lists, from the fallback copies.
	for _, d := range []string{st.store, st.esp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	var names []string
	for h := range hashes {
		names = append(names, h)
		text, err := os.ReadFile(filepath.Join(st.root, contract.FallbackDir[1:], h))
		if err != nil {
			return nil, fmt.Errorf("root tree %s: the MANIFEST lists text %s: %w", o.Root, h, err)
		}
		if _, err := (off2f.Store{Dir: st.store}).Put(h, text); err != nil {
			return nil, err
		}
	}
	if err := off2f.WriteManifest(filepath.Join(st.store, off2f.ManifestName), names); err != nil {
		return nil, err
	}
	im := &Image{Layout: OFF2F, Hostname: cfg.HostnameOrDefault(), Pmem: []string{outdir.TextPmemFile, outdir.StatePmemFile}, Services: []ServiceInfo{},
		Arch: opts.Target.GOARCH(), Target: opts.Target}
	if err := b.textStore(ctx, st); err != nil {
		return nil, err
	}
	if err := b.state(ctx, st, im); err != nil {
		return nil, err
	}
	if !o.InPlace {
		im.Kernel, im.Disk = outdir.KernelFile, outdir.DiskFile
		if err := b.disk(ctx, st, im); err != nil {
			return nil, err
		}
		if err := b.writeImage(im); err != nil {
			return nil, err
		}
	}
	if err := os.RemoveAll(b.work); err != nil {
		return nil, err
	}
	if err := replaceDir(tmp, o.Out); err != nil {
		return nil, err
	}
	ok = true
	return im, nil
}

// copyRootTree copies the tree at src to dst: directories (their modes too), regular files with
// their modes, symbolic links as links. Anything else (device nodes, which
// Buildroot and Yocto make at image time, not in the tree) is refused.
func copyRootTree(dst, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, fi.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			return copyFile(to, p, fi.Mode().Perm())
		default:
			return fmt.Errorf("%s: a %s; only directories, files and symbolic links are copied", p, strings.TrimSpace(fi.Mode().Type().String()))
		}
	})
}
