package appliance

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/image/gpt"
	"github.com/nvboot/nvboot/image/guest"
	"github.com/nvboot/nvboot/image/guest/derive"
	"github.com/nvboot/nvboot/image/initramfs"
	"github.com/nvboot/nvboot/image/pmem"
	"github.com/nvboot/nvboot/off2f"
)

// builder is one Build: the options, the output directory being filled and
// the scratch directory under it.
type builder struct {
	Options
	dir  string
	work string
}

// staging holds the trees the filesystems are made from.
type staging struct {
	root  string // the root filesystem
	store string // the text store (its filesystem's root)
	esp   string // the EFI system partition
}

func (b *builder) build(ctx context.Context) (*Image, error) {
	st := staging{root: filepath.Join(b.work, "root"), store: filepath.Join(b.work, "store"), esp: filepath.Join(b.work, "esp")}
	for _, d := range []string{st.root, st.store, st.esp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	progs, err := b.buildPrograms(ctx)
	if err != nil {
		return nil, err
	}
	loader := filepath.Join(b.work, "ld-off2f")
	if b.Layout == OFF2F {
		b.logf("building ld-off2f")
		if err := run(ctx, nil, "make", "-s", "-C", filepath.Join(b.ModuleRoot, "loader"), "OUT="+loader); err != nil {
			return nil, fmt.Errorf("building ld-off2f: %w", err)
		}
	}
	for _, d := range []string{"bin", "sbin", "lib", "etc/nvboot", "proc", "sys", "dev", "run", "tmp", "nv/text", "nv/state"} {
		if err := os.MkdirAll(filepath.Join(st.root, d), 0o755); err != nil {
			return nil, err
		}
	}
	im := &Image{Layout: b.Layout, Hostname: b.Config.HostnameOrDefault(), Kernel: KernelFile, Disk: DiskFile,
		Pmem: []string{TextPmemFile, StatePmemFile}}
	for _, p := range progs {
		im.TextBytes += p.Text
	}
	b.logf("placing %d programs (%s layout, %.1f MiB of text+rodata)", len(progs), b.Layout, float64(im.TextBytes)/(1<<20))
	hashes, err := b.place(progs, st, loader)
	if err != nil {
		return nil, err
	}
	useStore := b.Layout == OFF2F || b.Layout == DAXELF
	if useStore {
		if err := off2f.WriteManifest(filepath.Join(st.store, off2f.ManifestName), hashes); err != nil {
			return nil, err
		}
		if err := off2f.WriteManifest(filepath.Join(st.root, guest.Manifest[1:]), hashes); err != nil {
			return nil, err
		}
	}
	dev, err := derive.FromImage(b.Config, derive.Options{BinDir: b.binDir(), TextStore: useStore})
	if err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(st.root, guest.InitConfigPath[1:]), dev.Init); err != nil {
		return nil, err
	}
	if dev.Poold != nil {
		if err := writeJSON(filepath.Join(st.root, guest.PooldConfigPath[1:]), dev.Poold); err != nil {
			return nil, err
		}
	}
	for _, p := range progs[1:] {
		sv := dev.Service(p.Name)
		pc := b.Config.PackageConfig[p.Package]
		// Args as nvinit starts it (poold with its config), [] for none.
		im.Services = append(im.Services, ServiceInfo{Name: p.Name, Package: p.Package, Path: sv.Path,
			Args: append([]string{}, sv.Args...), WaitFor: pc.WaitFor, ForwardPort: pc.ForwardPort, DontStart: pc.DontStart, TextBytes: p.Text})
	}

	// pmem0: the text store, a bigalloc ext4 so text lands 2 MiB-aligned.
	storeImg := filepath.Join(b.work, "textstore.ext4")
	storeSize, err := b.storeSize(st.store)
	if err != nil {
		return nil, err
	}
	storeSize = pmemSize(storeSize) - pmem.Align // the rest of the section is room to grow
	b.logf("text store: %d MiB ext4 (2 MiB clusters)", storeSize>>20)
	if err := mkExt4(ctx, st.store, storeImg, storeSize, uuidFor(b.seed(), "text"), "-O", "bigalloc", "-C", "2097152"); err != nil {
		return nil, fmt.Errorf("text store: %w", err)
	}
	if useStore {
		// The provisioning source: nvinit copies it onto a blank or stale store.
		if err := os.MkdirAll(filepath.Join(st.root, filepath.Dir(guest.StoreImage)[1:]), 0o755); err != nil {
			return nil, err
		}
		if err := copyFile(filepath.Join(st.root, guest.StoreImage[1:]), storeImg, 0o444); err != nil {
			return nil, err
		}
	}
	if err := b.pmemImage(TextPmemFile, storeImg, storeSize); err != nil {
		return nil, err
	}
	// pmem1: the state filesystem, empty.
	stateSize, _ := stateSizes(b.Config)
	stateDir, stateImg := filepath.Join(b.work, "state"), filepath.Join(b.work, "state.ext4")
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, err
	}
	b.logf("state: %d MiB ext4", stateSize>>20)
	if err := mkExt4(ctx, stateDir, stateImg, stateSize, uuidFor(b.seed(), "state")); err != nil {
		return nil, fmt.Errorf("state filesystem: %w", err)
	}
	if err := b.pmemImage(StatePmemFile, stateImg, stateSize); err != nil {
		return nil, err
	}
	if im.TextSHA256, err = sha256File(filepath.Join(b.dir, TextPmemFile)); err != nil {
		return nil, err
	}
	if im.StateSHA256, err = sha256File(filepath.Join(b.dir, StatePmemFile)); err != nil {
		return nil, err
	}
	// The provisioning source: nvinit writes it onto a blank state device.
	if err := os.MkdirAll(filepath.Join(st.root, filepath.Dir(guest.StateImage)[1:]), 0o755); err != nil {
		return nil, err
	}
	if err := gzipFile(filepath.Join(st.root, guest.StateImage[1:]), stateImg, 0o444); err != nil {
		return nil, fmt.Errorf("state template: %w", err)
	}

	// The root filesystem, or the initramfs.
	var parts []gpt.Partition
	if err := copyFile(filepath.Join(b.dir, KernelFile), b.Kernel, 0o644); err != nil {
		return nil, err
	}
	rootImg, initrd := "", ""
	if b.Layout == Initramfs {
		im.Initrd = InitrdFile
		im.Cmdline = "rdinit=" + guest.Init
		initrd = filepath.Join(b.dir, InitrdFile)
		if err := writeInitramfs(st.root, initrd); err != nil {
			return nil, err
		}
	} else {
		fs := b.Config.RootFSOrDefault()
		rootImg = filepath.Join(b.work, "root."+fs)
		b.logf("root filesystem: %s", fs)
		if fs == "erofs" {
			err = mkErofs(ctx, st.root, rootImg, uuidFor(b.seed(), "root"))
		} else {
			var n int64
			n, _, err = treeSize(st.root)
			if err == nil {
				err = mkExt4(ctx, st.root, rootImg, (n*5/4+(8<<20))&^(1<<20-1), uuidFor(b.seed(), "root"))
			}
		}
		if err != nil {
			return nil, fmt.Errorf("root filesystem: %w", err)
		}
		im.Cmdline = fmt.Sprintf("root=%s rootfstype=%s ro init=%s", guest.RootDevice, fs, guest.Init)
	}
	im.Cmdline += " quiet"
	if !b.Config.NoBootTrims {
		im.Cmdline += " " + BootTrims
	}
	if b.Config.KernelCmdline != "" {
		im.Cmdline += " " + b.Config.KernelCmdline
	}
	espImg, err := b.espImage(ctx, st.esp, im.Cmdline, initrd)
	if err != nil {
		return nil, fmt.Errorf("EFI system partition: %w", err)
	}
	dataDir, dataImg := filepath.Join(b.work, "data"), filepath.Join(b.work, "data.ext4")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	if err := mkExt4(ctx, dataDir, dataImg, 16<<20, uuidFor(b.seed(), "data")); err != nil {
		return nil, fmt.Errorf("data partition: %w", err)
	}
	parts = append(parts, gpt.Partition{Name: "esp", Type: gpt.TypeESP, Src: espImg})
	if rootImg != "" {
		parts = append(parts, gpt.Partition{Name: "root", Type: gpt.TypeRootX8664, Src: rootImg})
	}
	parts = append(parts, gpt.Partition{Name: "data", Type: gpt.TypeLinuxData, Src: dataImg})
	b.logf("disk image")
	lay, err := gpt.Write(filepath.Join(b.dir, DiskFile), b.seed(), parts)
	if err != nil {
		return nil, err
	}
	for _, l := range lay {
		im.Partitions = append(im.Partitions, Partition{Name: l.Name, Offset: l.First * 512, Bytes: (l.Last - l.First + 1) * 512})
	}
	imJSON, err := json.MarshalIndent(im, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(b.dir, ManifestFile), append(imJSON, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(b.dir, StampFile), []byte(stampText), 0o644); err != nil {
		return nil, err
	}
	return im, nil
}

// BootTrims are kernel parameters that take probing the appliance does not
// need out of the boot: PCI interrupts routed through the PIIX router instead
// of evaluating ACPI link objects (230 ms per virtio device under TCG), no
// PS/2 keyboard or mouse probe (600 ms before the root is mounted), and no
// check that the IO-APIC delivers the timer interrupt (no_timer_check: a
// busy wait for timer ticks, 11 ms of a 1-GIPS core's boot, for a fault of
// old chipsets).
const BootTrims = "acpi=noirq i8042.noaux i8042.nokbd no_timer_check"

// seed makes the uuids of one image: the layout and hostname, so two layouts
// of one config do not share filesystem uuids.
func (b *builder) seed() string { return string(b.Layout) + "/" + b.Config.HostnameOrDefault() }

func volID(seed string) string {
	h := sha256.Sum256([]byte("nvboot-esp\x00" + seed))
	return hex.EncodeToString(h[:4])
}

// binDir is where the services' executables are in the guest.
func (b *builder) binDir() string {
	if b.Layout == DAXELF {
		return guest.DAXBinDir
	}
	return guest.BinDir
}

// servicePath is where a service's executable is in the guest.
func (b *builder) servicePath(name string) string { return b.binDir() + "/" + name }

// place puts nvinit and the services where the layout wants them and
// returns the hashes the store MANIFEST lists.
func (b *builder) place(progs []program, st staging, loader string) ([]string, error) {
	var hashes []string
	for i, p := range progs {
		dst := filepath.Join(st.root, b.servicePath(p.Name)[1:])
		if i == 0 {
			dst = filepath.Join(st.root, guest.Init[1:])
		}
		switch {
		case b.Layout == OFF2F:
			h, err := b.convert(p, i == 0, dst, st)
			if err != nil {
				return nil, err
			}
			hashes = append(hashes, h)
		case b.Layout == DAXELF && i > 0:
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
			if err := copyFile(dst, p.Bin, 0o755); err != nil {
				return nil, err
			}
		}
	}
	if b.Layout == OFF2F {
		if err := copyFile(filepath.Join(st.root, guest.Loader[1:]), loader, 0o755); err != nil {
			return nil, err
		}
	}
	return hashes, nil
}

// convert makes p an OFF2F program: the header file at dst, the text in the
// store and, as the fallback, on the root filesystem. nvinit's loader mounts
// the store itself (it runs before anyone else could).
func (b *builder) convert(p program, isInit bool, dst string, st staging) (string, error) {
	raw, err := os.ReadFile(p.Bin)
	if err != nil {
		return "", err
	}
	opt := off2f.Options{Loader: guest.Loader, StoreDir: guest.TextDir, FallbackDir: guest.FallbackDir}
	if isInit {
		opt.Device, opt.FSType, opt.MountOpts = guest.TextDevice, "ext4", "dax=always"
	}
	conv, err := off2f.Convert(raw, opt)
	if err != nil {
		return "", fmt.Errorf("converting %s to OFF2F: %w", p.Name, err)
	}
	for _, d := range []string{st.store, filepath.Join(st.root, guest.FallbackDir[1:])} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
		if _, err := (off2f.Store{Dir: d}).Put(conv.TextName(), conv.Text); err != nil {
			return "", fmt.Errorf("storing the text of %s: %w", p.Name, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	return conv.TextName(), off2f.WriteFileAtomic(dst, conv.Header, 0o755)
}

// storeSize is the text store filesystem's size: TextStoreMiB, or fitted to
// the files (a 2 MiB cluster at least each) with a quarter to spare.
func (b *builder) storeSize(dir string) (int64, error) {
	n, files, err := treeSize(dir)
	if err != nil {
		return 0, err
	}
	need := n + int64(files)*(2<<20) + 16<<20
	if b.Config.TextStoreMiB > 0 {
		size := int64(b.Config.TextStoreMiB) << 20
		if size < need {
			return 0, fmt.Errorf("TextStoreMiB %d: the text store needs at least %d MiB (%d files, %d MiB of text): make it larger or 0 (fitted)",
				b.Config.TextStoreMiB, (need+(1<<20)-1)>>20, files, n>>20)
		}
		return size, nil
	}
	return (need + need/4 + (2<<20 - 1)) &^ (2<<20 - 1), nil
}

// pmemSize is the size of a pmem image holding a filesystem of fsSize: the
// 2 MiB of fsdax metadata added, rounded up to 128 MiB (the kernel adds pmem
// in memory sections).
func pmemSize(fsSize int64) int64 {
	const section = 128 << 20
	return (fsSize + pmem.Align + section - 1) / section * section
}

// pmemImage writes out/name: the PFN info block and the filesystem image.
func (b *builder) pmemImage(name, fsImg string, fsSize int64) error {
	return pmem.WriteImage(filepath.Join(b.dir, name), pmemSize(fsSize), fsImg)
}

// writeInitramfs packs the root tree into a newc archive.
func writeInitramfs(root, out string) error {
	a := initramfs.New()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return a.Dir(rel, 0o755)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return a.File(rel, fi.Mode().Perm(), data)
	})
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if err := a.CharDev("dev/console", 0o600, 5, 1); err != nil {
		return err
	}
	return off2f.WriteFileAtomic(out, a.Bytes(), 0o644)
}

// gzipFile writes src gzip-compressed to dst with mode perm. The header has
// no name and no time: the same src gives the same bytes.
func gzipFile(dst, src string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(out, gzip.BestCompression)
	if err == nil {
		_, err = io.Copy(zw, in)
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Chmod(dst, perm)
}

// sha256File is the sha256 of the file at path, in hex.
func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyFile copies src to dst with mode perm.
func copyFile(dst, src string, perm os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, b, perm); err != nil {
		return err
	}
	return os.Chmod(dst, perm)
}

// writeJSON writes v as indented JSON, a newline at the end.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
