package appliance

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/derive"
	"github.com/nvboot/nvboot/off2f"
)

// place is the third phase: it puts nvinit, the services and (off2f)
// ld-off2f where the layout wants them, writes the MANIFEST of the text
// store and the device configs, and records the services in im.
func (b *builder) place(progs []program, loader string, dev *derive.Configs, st staging, im *Image) error {
	for _, p := range progs {
		im.TextBytes += p.Text
	}
	if b.Config.HasShell() {
		im.Userland = b.Config.Userland
	}
	b.logf("placing %d programs (%s layout, %.1f MiB of text+rodata)", len(progs), b.Layout, float64(im.TextBytes)/(1<<20))
	hashes, err := b.placePrograms(progs, st, loader)
	if err != nil {
		return err
	}
	if b.useStore() {
		if err := off2f.WriteManifest(filepath.Join(st.store, off2f.ManifestName), hashes); err != nil {
			return err
		}
		if err := off2f.WriteManifest(filepath.Join(st.root, contract.Manifest[1:]), hashes); err != nil {
			return err
		}
	}
	if err := b.placeUpdateTLS(st); err != nil { // updatetls.go
		return err
	}
	if err := b.placeImageKey(st, im); err != nil { // base.go
		return err
	}
	if err := b.placePull(st); err != nil { // pull.go
		return err
	}
	if dev.Poold != nil {
		if err := writeJSON(filepath.Join(st.root, contract.PooldConfigPath[1:]), dev.Poold); err != nil {
			return err
		}
	}
	for _, p := range progs[1:] {
		if p.Path != "" {
			continue // not a service: the userland, nvpull
		}
		sv := dev.Service(p.Name)
		if sv == nil {
			return fmt.Errorf("program %s: not among the services of nvinit's config", p.Name)
		}
		pc := b.Config.PackageConfig[p.Package]
		// Args as nvinit starts it (poold with its config), [] for none.
		im.Services = append(im.Services, ServiceInfo{Name: p.Name, Package: p.Package, Path: sv.Path,
			Args: append([]string{}, sv.Args...), WaitFor: pc.WaitFor.Ready(), ForwardPort: pc.ForwardPort, DontStart: pc.DontStart, TextBytes: p.Text, Checker: pc.Checker})
	}
	if err := b.placeGokrazy(st); err != nil {
		return err
	}
	if err := b.placeEtc(st); err != nil { // rootfs.go
		return err
	}
	return writeJSON(filepath.Join(st.root, contract.InitConfigPath[1:]), dev.Init)
}

// placePrograms puts nvinit and the services where the layout wants them
// and returns the hashes the store MANIFEST lists.
func (b *builder) placePrograms(progs []program, st staging, loader string) ([]string, error) {
	var hashes []string
	for i, p := range progs {
		dst := filepath.Join(st.root, b.servicePath(p.Name)[1:])
		if i == 0 {
			dst = filepath.Join(st.root, contract.Init[1:])
		} else if p.Path != "" {
			dst = filepath.Join(st.root, p.Path[1:])
		}
		if err := placeLinks(dst, p.Name, p.Links); err != nil {
			return nil, err
		}
		switch {
		case b.Layout == OFF2F:
			role := contract.RoleService
			if i == 0 {
				role = contract.RoleInit
			} else if p.Path != "" {
				role = cmp.Or(p.Role, contract.RoleUserland)
			}
			h, err := b.convert(p, role, dst, st)
			if err != nil {
				return nil, err
			}
			hashes = append(hashes, h)
		case b.Layout == DAXELF && i > 0 && p.Path == "":
			dst = filepath.Join(st.store, "bin", p.Name)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return nil, err
			}
			if err := copyFile(dst, p.Bin, 0o755); err != nil {
				return nil, err
			}
			// The whole executable is the store's content: its hash is what
			// makes a store current or stale.
			raw, err := os.ReadFile(p.Bin)
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256(raw)
			hashes = append(hashes, hex.EncodeToString(sum[:]))
		default:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return nil, err
			}
			if err := copyFile(dst, p.Bin, 0o755); err != nil {
				return nil, err
			}
			if b.Layout == ELF && b.OnProgram != nil {
				if err := b.onWhole(p, i, dst, st); err != nil {
					return nil, err
				}
			}
		}
	}
	if b.Config.HasShell() {
		// The console is the shell's: nvinit's commands are programs
		// there, links to nvinit, which hands them to PID 1.
		if err := placeLinks(filepath.Join(st.root, contract.Init[1:]), path.Base(contract.Init), contract.InitCommands); err != nil {
			return nil, err
		}
	}
	if b.Layout == OFF2F {
		if err := copyFile(filepath.Join(st.root, contract.Loader[1:]), loader, 0o755); err != nil {
			return nil, err
		}
	}
	return hashes, nil
}

// convert makes p an OFF2F program: the header file at dst, the text in the
// store and, as the fallback, on the root filesystem. nvinit's loader mounts
// the store itself (it runs before anyone else could), and checks nvinit's
// whole text against the CRC-32C in its note (a damaged PID 1 would stop
// every boot: the loader runs the fallback copy instead, and nvinit repairs
// the store's); a service's damaged text is nvinit's to find and repair.
func (b *builder) convert(p program, role string, dst string, st staging) (string, error) {
	isInit := role == contract.RoleInit
	raw, err := os.ReadFile(p.Bin)
	if err != nil {
		return "", err
	}
	opt := off2f.Options{Loader: contract.Loader, StoreDir: contract.TextDir, FallbackDir: contract.FallbackDir, Arch: b.Target.GOARCH()}
	if isInit {
		opt.Device, opt.FSType, opt.MountOpts = contract.TextDevice, "ext4", "dax=always"
		opt.CRC = true
	}
	stores := []string{st.store, filepath.Join(st.root, contract.FallbackDir[1:])}
	for _, d := range append(stores, filepath.Dir(dst)) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	conv, _, err := off2f.Install(raw, opt, dst, stores...)
	if err != nil {
		return "", fmt.Errorf("installing %s as OFF2F: %w", p.Name, err)
	}
	if b.OnProgram != nil {
		guest := "/" + filepath.ToSlash(strings.TrimPrefix(dst, st.root+string(filepath.Separator)))
		if err := b.OnProgram(Program{Name: p.Name, Role: role, Path: guest, Header: conv.Header, Text: conv.Text, TextName: conv.TextName()}); err != nil {
			return "", fmt.Errorf("program %s: %w", p.Name, err)
		}
	}
	return conv.TextName(), nil
}

// onWhole gives OnProgram the elf image's program p (the i-th), placed at
// dst, whole.
func (b *builder) onWhole(p program, i int, dst string, st staging) error {
	role := contract.RoleService
	if i == 0 {
		role = contract.RoleInit
	} else if p.Path != "" {
		role = cmp.Or(p.Role, contract.RoleUserland)
	}
	raw, err := os.ReadFile(p.Bin)
	if err != nil {
		return err
	}
	guest := "/" + filepath.ToSlash(strings.TrimPrefix(dst, st.root+string(filepath.Separator)))
	if err := b.OnProgram(Program{Name: p.Name, Role: role, Path: guest, ELF: raw}); err != nil {
		return fmt.Errorf("program %s: %w", p.Name, err)
	}
	return nil
}

// placeLinks makes each of names a relative symbolic link to target, the
// file dst will be, beside it.
func placeLinks(dst, target string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	for _, n := range names {
		if n == target || strings.Contains(n, "/") {
			return fmt.Errorf("link %q beside %s: not a command name", n, dst)
		}
		if err := os.Symlink(target, filepath.Join(filepath.Dir(dst), n)); err != nil {
			return err
		}
	}
	return nil
}
