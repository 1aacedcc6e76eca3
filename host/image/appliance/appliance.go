package appliance

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/kernel"
)

// Layout is how the programs are placed in the image.
type Layout string

// The layouts `nvboot build -layout` and `nvboot measure -layouts` know.
const (
	// OFF2F: nvinit and the services are OFF2F programs, their text in the
	// text store on pmem (DAX), header and data on the root filesystem.
	OFF2F Layout = "off2f"
	// ELF: plain static executables on the root filesystem.
	ELF Layout = "elf"
	// Initramfs: plain executables in an initramfs the kernel unpacks into RAM.
	Initramfs Layout = "initramfs"
	// DAXELF: the whole service executables on the DAX filesystem on pmem,
	// nvinit on the root filesystem.
	DAXELF Layout = "dax-elf"
)

// Layouts lists every layout, in the order reports use.
var Layouts = []Layout{OFF2F, ELF, Initramfs, DAXELF}

// ParseLayout checks a layout name.
func ParseLayout(s string) (Layout, error) {
	for _, l := range Layouts {
		if string(l) == s {
			return l, nil
		}
	}
	names := make([]string, len(Layouts))
	for i, l := range Layouts {
		names[i] = string(l)
	}
	return "", fmt.Errorf("layout %q: unknown (want one of %s)", s, strings.Join(names, ", "))
}

// DefaultLayout is the layout of a build of target t that names none:
// off2f, the product, or elf for a Raspberry Pi, which has no pmem for a
// text store.
func DefaultLayout(t config.Target) Layout {
	if t == config.TargetRPi {
		return ELF
	}
	return OFF2F
}

// stampText is what outdir.StampFile says to whoever finds it.
const stampText = "This directory was written by nvboot build -o: the next build into it replaces it whole.\n" +
	"Keep nothing else here; a build refuses a directory holding other files.\n"

// Options say what to build.
type Options struct {
	Config *config.Config
	Layout Layout
	// Target is the board to build for (config.ChooseTarget of `nvboot
	// build -arch`); "": the config's own choice.
	Target config.Target
	// Out is the output directory: created, or replaced when it holds an
	// earlier nvboot build and nothing else (see the package doc); anything
	// else there is refused.
	Out string
	// Kernel is the kernel to put in the image: the target's (an x86
	// bzImage, an arm64 Image).
	Kernel string
	// ModuleRoot is the nvboot module: nvinit and ld-off2f come from it, and
	// Go import paths in Packages are built in it.
	ModuleRoot string
	// ConfigDir resolves local package directories ("./svc") in Packages;
	// empty: the current directory.
	ConfigDir string
	// Logf reports progress; nil: quiet.
	Logf func(format string, args ...any)
	// DiscardState lets a rebuild replace a pmem-state.img that the device
	// has used with a blank one (see BuildImage).
	DiscardState bool
	// Board is what the image boots on: BoardPC (UEFI or QEMU's direct
	// boot, pmem) or BoardRPi (a Raspberry Pi's card, rpidisk.go). It
	// follows Target: arm64-rpi is BoardRPi, and BoardRPi with no Target
	// chooses arm64-rpi (any other Target with it is refused).
	Board Board
	// ImageKey is the public key (PEM, contract.MarshalImageKey) the
	// appliance checks pulled images with, put on the root at
	// contract.ImageKeyPath; nil: none.
	ImageKey []byte
	// OnProgram, when set, is given each OFF2F program (each program of
	// an elf image, whole) as the build
	// converts it (the off2f layout): what nvboot push publishes beside
	// the image's files. An error fails the build.
	OnProgram func(Program) error
}

// Program is one OFF2F program of an image, as converted.
type Program struct {
	Name string // nvinit, the service's, the userland's (bb)
	Role string // contract.RoleInit, RoleService or RoleUserland
	Path string // the header file's path on the device
	// Header is the header file; Text the text file, named TextName in
	// the store.
	Header, Text []byte
	TextName     string
	// ELF is the whole static program of an elf image (no store), at
	// Path; Header, Text and TextName are then empty.
	ELF []byte
}

// Board is the kind of machine an image is built for.
type Board string

const (
	// BoardPC is a board with UEFI firmware and pmem (amd64-pc,
	// arm64-virt), or QEMU playing one: the GPT disk, the pmem images.
	BoardPC Board = ""
	// BoardRPi is a Raspberry Pi (3, 4, 5, Zero 2 W): arm64 programs, the
	// kernel and firmware from KernelPackage and FirmwarePackage, an MBR
	// card whose data partition holds the state; no pmem (host/image/rpi).
	BoardRPi Board = "rpi"
)

// Image is image.json: what was built and how to boot it.
type Image struct {
	Layout   Layout
	Hostname string
	Kernel   string // file in the output directory
	Initrd   string `json:",omitempty"`
	Cmdline  string // kernel command line (vm adds the console)
	Disk     string
	// Pmem are the NVDIMM images in guest order: pmem0 (text), pmem1
	// (state) and, with an Uncompressed kernel, pmem2 (the kernel region).
	Pmem []string
	// Uncompressed is the kernel the kernel region holds (a PVH vmlinux,
	// or an arm64 image's Image, the same file as Kernel), and
	// UncompressedSHA256 its hash: what the boot entry
	// names, so the firmware boots the region's kernel only when it is
	// this one (appliance.BootKernel). Empty: no kernel region.
	Uncompressed       string `json:",omitempty"`
	UncompressedSHA256 string `json:",omitempty"`
	Services           []ServiceInfo
	// Userland is the image config's Userland, empty for none: with
	// "u-root" the console is gosh's, without one it takes only nvinit's
	// commands.
	Userland string `json:",omitempty"`
	// TextBytes is the read-only bytes (text + rodata) of nvinit, the
	// services and the userland: what OFF2F keeps on pmem.
	TextBytes uint64
	// Partitions of the disk image, in order (vda1, vda2, ...).
	Partitions []Partition
	// TextSHA256 and StateSHA256 are the sha256 of pmem-text.img and
	// pmem-state.img as this build made them (hex). The files differ from
	// them once a device has used them, or when a rebuild kept the ones
	// a device had used.
	TextSHA256  string `json:",omitempty"`
	StateSHA256 string `json:",omitempty"`
	// Arch is the GOARCH the image's programs and kernel are built for,
	// and Target the board (config.Target): what a runner boots it on.
	// An image.json without them (an older build) is amd64's (ArchOrDefault).
	Arch   string        `json:",omitempty"`
	Target config.Target `json:",omitempty"`
	// Slots is 2 for a disk laid out for nvboot update (contract.SlotPartitions:
	// two roots, two boot partitions each with its slot's UKI); 0: one root.
	Slots int `json:",omitempty"`
	// ID names the image (contract.ImageIDPath on its root): what the
	// appliance reports once it runs it. Slots 2 only.
	ID string `json:",omitempty"`
	// RootBytes is the root filesystem's size, the start of each root
	// partition that nvboot update sends; BootBytes a boot partition's
	// filesystem, sent whole. Slots 2 only.
	RootBytes int64 `json:",omitempty"`
	BootBytes int64 `json:",omitempty"`
	// Version is the config's Version (contract.VersionPath on the root).
	Version string `json:",omitempty"`
	// BaseSHA256 is the hash of the root tree without the services'
	// programs (base.go): two images with the same base, kernel and boot
	// files differ only in what deploys change.
	BaseSHA256 string `json:",omitempty"`
}

// ArchOrDefault is the image's GOARCH: Arch, or amd64 for an image.json
// written before images recorded it (every one was amd64's).
func (im *Image) ArchOrDefault() string { return cmp.Or(im.Arch, "amd64") }

// TargetOrDefault is the image's board: Target, or for an image.json
// without one its Arch's first (amd64-pc, arm64-virt).
func (im *Image) TargetOrDefault() config.Target {
	if im.Target != "" {
		return im.Target
	}
	if im.ArchOrDefault() == "arm64" {
		return config.TargetVirt
	}
	return config.TargetPC
}

// Board is the kind of board the image is for: BoardRPi for an arm64-rpi
// image (a Raspberry Pi card: no pmem, no Kernel file beside the disk, the
// kernel on the card's boot partition), else BoardPC.
func (im *Image) Board() Board {
	if im.TargetOrDefault() == config.TargetRPi {
		return BoardRPi
	}
	return BoardPC
}

// Part returns the partition called name, or nil.
func (im *Image) Part(name string) *Partition {
	for i := range im.Partitions {
		if im.Partitions[i].Name == name {
			return &im.Partitions[i]
		}
	}
	return nil
}

// Partition is where a partition lies in the disk image, in bytes.
type Partition struct {
	Name          string
	Offset, Bytes int64
}

// ServiceInfo is one service of the image.
type ServiceInfo struct {
	Name    string
	Package string
	Path    string // in the guest
	// Args are the arguments nvinit starts the service with (its
	// CommandLineFlags; poold's -config); [] for none.
	Args        []string
	WaitFor     string `json:",omitempty"`
	ForwardPort int    `json:",omitempty"`
	DontStart   bool   `json:",omitempty"`
	// TextBytes is the program's read-only bytes (text + rodata), its part
	// of the Image's TextBytes.
	TextBytes uint64 `json:",omitempty"`
	// Checker is the service's config Checker: how nvboot powercut
	// writes to it and checks it; nil: none.
	Checker *config.Checker `json:",omitempty"`
}

// ReadImage reads the image.json of an output directory.
func ReadImage(dir string) (*Image, error) {
	b, err := os.ReadFile(filepath.Join(dir, outdir.ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("image %s: %w (build it with nvboot build -o %s)", dir, err, dir)
	}
	var im Image
	if err := json.Unmarshal(b, &im); err != nil {
		return nil, fmt.Errorf("image %s: %s: %w", dir, outdir.ManifestFile, err)
	}
	if _, err := ParseLayout(string(im.Layout)); err != nil {
		return nil, fmt.Errorf("image %s: %w", dir, err)
	}
	return &im, nil
}

// Build builds the image into o.Out (BuildImage, image.json only).
func Build(ctx context.Context, o Options) (*Image, error) {
	res, err := BuildImage(ctx, o)
	if err != nil {
		return nil, err
	}
	return res.Image, nil
}

// BuildImage builds the image into o.Out. Over an earlier build there, it
// keeps the earlier pmem-state.img when a device has used it (the device's
// state) and the new build's state can take it over, and refuses with an
// error wrapping ErrStateNotKept when it cannot (unless o.DiscardState); it
// keeps the earlier pmem-text.img, as the device left it, when the text
// store is unchanged. The Result says which.
func BuildImage(ctx context.Context, o Options) (*Result, error) {
	if o.Config == nil {
		return nil, errors.New("appliance: no config")
	}
	if err := o.Config.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	// A Target given must agree with the config's packages too.
	if o.Board == BoardRPi && o.Target == "" {
		o.Target = config.TargetRPi
	}
	ch, err := o.Config.ChooseTarget(string(o.Target))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	o.Target = ch.Target
	switch {
	case o.Target == config.TargetRPi && o.Board == BoardPC:
		o.Board = BoardRPi
	case o.Target != config.TargetRPi && o.Board == BoardRPi:
		return nil, fmt.Errorf("board %s with target %s (%s): a Raspberry Pi card is target %s", o.Board, o.Target, ch.Why, config.TargetRPi)
	}
	if _, err := ParseLayout(string(o.Layout)); err != nil {
		return nil, err
	}
	if err := checkBoard(&o); err != nil {
		return nil, err
	}
	if o.Config.Slots == 2 && o.Layout == Initramfs {
		return nil, fmt.Errorf("config: Slots 2 with the %s layout: an initramfs has no root partition to put in a slot; build the %s, %s or %s layout", Initramfs, OFF2F, ELF, DAXELF)
	}
	if o.Out == "" {
		return nil, errors.New("no output directory (-o DIR)")
	}
	// Every path absolute: go build and make run in other directories.
	if o.Out, err = AbsOut(o.Out); err != nil {
		return nil, err
	}
	// ModuleRoot and ConfigDir "": the current directory.
	o.ModuleRoot, o.ConfigDir = absPath(cmp.Or(o.ModuleRoot, ".")), absPath(cmp.Or(o.ConfigDir, "."))
	if o.Kernel != "" {
		o.Kernel = absPath(o.Kernel)
	}
	if err := CheckOut(o.Out); err != nil {
		return nil, err
	}
	// Held to the end: no VM boots the earlier build while its state is
	// carried over, and none starts on it while it is replaced.
	unlockOut, err := lockOut(o.Out)
	if err != nil {
		return nil, err
	}
	defer func() {
		if unlockOut != nil {
			unlockOut()
		}
	}()
	// Before minutes of building: a state of another size is refused now.
	if err := checkStateEarly(&o); err != nil {
		return nil, err
	}
	if o.Board == BoardPC {
		karch, err := kernel.ArchForGOARCH(o.Target.GOARCH())
		if err != nil {
			return nil, err
		}
		if err := kernel.CheckArch(karch, o.Kernel); err != nil {
			return nil, fmt.Errorf("kernel for %s: %w", o.Target, err)
		}
	}
	if err := CheckTools(o.Config, o.Layout, o.Target); err != nil {
		return nil, err
	}
	tmp, unlock, err := startBuild(o.Out, o.logf)
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
	b := &builder{Options: o, dir: tmp, work: filepath.Join(tmp, ".work")}
	im, err := b.build(ctx)
	if err != nil {
		if ctx.Err() != nil {
			// What failed is whatever the cancellation killed (mke2fs, go
			// build): not worth naming.
			return nil, fmt.Errorf("building %s: interrupted (%v)", o.Out, context.Cause(ctx))
		}
		return nil, err
	}
	if err := os.RemoveAll(b.work); err != nil {
		return nil, err
	}
	if unlockOut == nil { // made since the build began
		if unlockOut, err = lockOut(o.Out); err != nil {
			return nil, err
		}
	}
	res := &Result{Image: im, Kept: []string{}, Discarded: []string{}}
	kept, discarded, err := carryOver(o.Out, tmp, im, o.DiscardState, o.logf)
	if err != nil {
		return nil, err
	}
	res.Kept, res.Discarded = append(res.Kept, kept...), append(res.Discarded, discarded...)
	if err := replaceDir(tmp, o.Out); err != nil {
		return nil, err
	}
	ok = true
	return res, nil
}

// absPath is p made absolute; as it is when the current directory is gone.
func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// AbsOut is the output directory out as an absolute path, a symbolic link
// resolved: the build is written beside the directory itself and renamed
// into its place.
func AbsOut(out string) (string, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", fmt.Errorf("output directory %s: %w", out, err)
	}
	if fi, err := os.Lstat(abs); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		if abs, err = filepath.EvalSymlinks(abs); err != nil {
			return "", fmt.Errorf("output directory %s: %w", out, err)
		}
	}
	return abs, nil
}

// CheckOut refuses an output directory that holds something other than an
// earlier build: replacing it would lose what the user put there; one
// that is in use (LockImage: a VM running on it, another build); and a
// mount point, which the build could not rename at its end. Nothing or
// an empty directory is fine; a directory is replaced only when every entry is
// a regular file a build writes and it carries the stamp. An image.json that
// is not nvboot's is refused even beside the stamp: it is the user's. (It may
// have fields a later nvboot added.)
func CheckOut(out string) error {
	fi, err := os.Lstat(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("output directory %s: %w", out, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("output directory %s: exists and is not a directory: refusing to replace it", out)
	}
	if err := checkNotMountPoint(out); err != nil {
		return err
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("output directory %s: %w", out, err)
	}
	if len(ents) == 0 {
		return checkFree(out)
	}
	var foreign, names []string
	stamped, manifest := false, false
	for _, e := range ents {
		name := e.Name()
		if !slices.Contains(outdir.OutputFiles, name) || !e.Type().IsRegular() {
			if e.IsDir() {
				name += "/"
			}
			foreign = append(foreign, name)
			continue
		}
		names = append(names, name)
		stamped = stamped || name == outdir.StampFile
		manifest = manifest || name == outdir.ManifestFile
	}
	if len(foreign) > 0 {
		return fmt.Errorf("output directory %s holds %s, which nvboot build does not write: refusing to replace it (build into a new or empty directory, or remove them)",
			out, listNames(foreign, 5))
	}
	if !stamped {
		return fmt.Errorf("output directory %s holds %s and no %s: not an nvboot image, refusing to replace it (build into a new or empty directory)",
			out, listNames(names, 5), outdir.StampFile)
	}
	if manifest {
		if err := checkManifest(filepath.Join(out, outdir.ManifestFile)); err != nil {
			return fmt.Errorf("output directory %s: its %s is not one nvboot build wrote (%v): refusing to replace it (is it your image config? build into another directory)",
				out, outdir.ManifestFile, err)
		}
	}
	return checkFree(out)
}

// checkFree fails when another process holds the lock of the image
// directory dir (a VM running on it, a build).
func checkFree(dir string) error {
	unlock, err := LockImage(dir)
	if err != nil {
		return err
	}
	unlock()
	return nil
}

// checkManifest checks that an image.json is one nvboot build wrote: a known
// layout and the file names a build gives.
func checkManifest(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var im Image
	if err := json.Unmarshal(b, &im); err != nil {
		return err
	}
	if _, err := ParseLayout(string(im.Layout)); err != nil {
		return err
	}
	pmem, kernelFile := []string{outdir.TextPmemFile, outdir.StatePmemFile}, outdir.KernelFileOf(im.ArchOrDefault())
	if im.Uncompressed != "" {
		pmem = append(pmem, outdir.KernelPmemFile)
	}
	if im.Board() == BoardRPi {
		pmem, kernelFile = nil, ""
	}
	if im.Kernel != kernelFile || im.Disk != outdir.DiskFile || !slices.Equal(im.Pmem, pmem) ||
		im.Initrd != "" && im.Initrd != outdir.InitrdFile || im.Uncompressed != "" && im.Uncompressed != outdir.UncompressedFileOf(im.ArchOrDefault()) {
		return fmt.Errorf("files %s, %s, %v, %q are not the ones a build writes", im.Kernel, im.Disk, im.Pmem, im.Initrd)
	}
	return nil
}

// listNames quotes up to n names, then says how many more there are.
func listNames(names []string, n int) string {
	q := make([]string, 0, n+1)
	for i, s := range names {
		if i == n {
			q = append(q, fmt.Sprintf("and %d more", len(names)-n))
			break
		}
		q = append(q, strconv.Quote(s))
	}
	return strings.Join(q, ", ")
}

// replaceDir moves the finished build into place; an earlier build there is
// moved aside first and removed once the new one is in.
func replaceDir(tmp, out string) error {
	old := ""
	if _, err := os.Stat(out); err == nil {
		old = tmp + ".old"
		if err := os.Rename(out, old); err != nil {
			return fmt.Errorf("moving the old %s aside: %w", out, err)
		}
	}
	if err := os.Rename(tmp, out); err != nil {
		if old != "" {
			os.Rename(old, out)
		}
		return fmt.Errorf("moving the build into %s: %w", out, err)
	}
	if old != "" {
		return os.RemoveAll(old)
	}
	return nil
}

func (o *Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}
