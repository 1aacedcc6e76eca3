package nvbootcmd

import (
	"context"
	"fmt"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/internal/cli"
)

const buildDescription = `Builds an appliance image into DIR: the services of the config (Go import
paths or local directories, as gokrazy lists packages) and nvinit, built as
static programs and placed as the layout says, a read-only root filesystem
(erofs), a GPT disk image (EFI system partition with the EFI-stub kernel,
root, data), the pmem images (pmem-text.img: the OFF2F text store as an fsdax
namespace; pmem-state.img: the state filesystem, also on the root filesystem
gzip-compressed, for nvinit to write onto a blank state device) and image.json.

Layouts: off2f (the product: text on pmem), elf (plain executables on the
root filesystem), initramfs (everything in RAM), dax-elf (whole executables on
the DAX filesystem). Without -config the demo image is built: the kv service
(examples/kv) on port 8080.

Targets: amd64-pc (x86-64, UEFI), arm64-virt (arm64, UEFI: QEMU's virt
board) and arm64-rpi (the Raspberry Pi). The first line the build prints says
which it chose and why: -arch (a GOARCH or a target) over the config's
Environment GOARCH (gokrazy's way to name it); without either, a gokrazy
instance config is arm64, as gokrazy builds it for the Pi, and any other
(nvboot's own, the demo) amd64. An arm64 image is the Pi's when the config
names a Pi part (FirmwarePackage, or a gokrazy config leaving it unset;
EEPROMPackage, BootloaderExtraLines), else the virt board's. Every program
of an image is the target's machine: a package's GoBuildEnvironment GOARCH
that is not is refused. An arm64 kernel is an arm64 Image: -kernel, the
config's KernelPath or $NVBOOT_KERNEL_ARM64.

A Raspberry Pi has no persistent memory: its image is the elf layout (the
default for arm64-rpi; the layouts that need pmem are refused), its state on
the card's data partition, each pheap transaction made durable by msync, and
its kernel, device trees and firmware come from the config's KernelPackage,
FirmwarePackage and EEPROMPackage (gokrazy's defaults: github.com/gokrazy/
kernel.rpi, firmware, rpi-eeprom) through the Go module proxy, onto the boot
partition with config.txt (BootloaderExtraLines; SerialConsole as
enable_uart and console=) and cmdline.txt; -kernel and KernelPath are
refused. The output is disk.img, an MBR card for nvboot flash, and
image.json; with Slots 2 the Pi firmware's tryboot switches slots. nvboot
run, measure and powercut do not boot a Pi card (QEMU's raspi3b runs no Pi
firmware).

The same inputs give the same bytes. A build marks DIR with the file
.nvboot-image; DIR is replaced only when it holds an earlier build and
nothing else (only the files a build writes: image.json, disk.img, bzImage,
initrd.cpio, pmem-*.img, .nvboot-image; and uefi-vars.fd, which 'nvboot run
-firmware uefi' adds and a rebuild drops). Any other file there, your image
config for one, makes the build refuse DIR and leave it as it is. A mount
point as DIR is refused too, before anything is built: the build puts DIR
in place by renaming it, which the kernel refuses for a mount point; build
into a directory inside it. A failed build leaves nothing.

Rebuilding an image that has been booted ('nvboot run DIR') keeps the
device's state: when DIR's pmem-state.img is no longer the blank state its
build wrote, the new build takes it over as it is, provided the new state has
the same size and format (StateMiB unchanged); otherwise the build refuses,
naming pmem-state.img, and changes nothing. -discard-state replaces it with a
blank state instead. pmem-text.img, as the device left it, is kept when the
new text store is the same as the earlier build's. What was kept or
discarded is said on stderr, and with -json in "Kept" and "Discarded" beside
image.json's fields.

When nvboot push has made a signing key beside the config
(update-signing/), the image carries its public half
(/etc/nvboot/image-key.pem), which an appliance checks pulled images with;
-key FILE names another key (its public or private file).

A build holds DIR's lock, the one nvboot run and powercut take while a VM
runs on DIR: a build into a DIR in use is refused, naming the process that
holds it.`

const buildExamples = `  nvboot build -o out/demo
  nvboot build -o out/demo                      # again, after nvboot run out/demo: the state is kept
  nvboot build -config big-state.json -discard-state -o out/demo
  nvboot build -config appliance.json -layout elf -o out/elf
  nvboot build -arch arm64 -kernel Image -o out/demo-arm64
  nvboot build -config gokrazy/hello/config.json -o out/pi    # a gokrazy config without GOARCH: a Raspberry Pi card
  nvboot build -json -o out/demo | jq .TextBytes`

func build(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "nvboot build", "nvboot build [-config FILE] [-layout L] [-arch A] -o DIR", buildDescription, buildExamples)
	cfgPath := fs.String("config", "", "image config `file` (JSON, see host/image/config); empty: the demo")
	layout := fs.String("layout", "", "program layout: off2f, elf, initramfs or dax-elf; empty: off2f, or elf for a Raspberry Pi (no pmem)")
	out := fs.String("o", "", "output `directory` (required)")
	kernel := fs.String("kernel", "", "kernel to use (the target's: an x86 bzImage, an arm64 Image); empty: $NVBOOT_KERNEL ($NVBOOT_KERNEL_ARM64 for arm64) or the cached kernel-config/ build")
	arch := fs.String("arch", "", "build for this GOARCH (amd64, arm64) or target (amd64-pc, arm64-virt, arm64-rpi), over the config's Environment GOARCH; empty: the config's")
	src := fs.String("src", "", "the nvboot checkout (nvinit and ld-off2f are built from it); empty: the current module")
	asJSON := fs.Bool("json", false, `print image.json on stdout when done, with "Kept" and "Discarded" (earlier pmem images kept, or discarded by -discard-state)`)
	keyPath := fs.String("key", "", "the signing key whose public half the image carries (a public or private key `file`); empty: the one nvboot push keeps beside the config, if any")
	discard := fs.Bool("discard-state", false, "start from a blank state: DIR's pmem-state.img, the device's state, is not kept (needed when it cannot be: a changed StateMiB)")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected arguments %q", fs.Args())
	}
	if *out == "" {
		return cli.Usagef("-o DIR is required")
	}
	if *layout != "" {
		if _, err := appliance.ParseLayout(*layout); err != nil {
			return cli.Usagef("-layout: %v", err)
		}
	}
	var err error
	// Absolute from here on, so that it names the same directory wherever
	// the build runs its tools.
	if *out, err = appliance.AbsOut(*out); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	// Before the inputs (the kernel may take minutes to build): a directory
	// the build would refuse at the end is refused now.
	if err := appliance.CheckOut(*out); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	log := cli.NewProgress(c.Stderr)
	in, err := loadInputs(ctx, *cfgPath, *src, *kernel, *arch, false, c.Stderr)
	if err != nil {
		return err
	}
	l := appliance.Layout(*layout)
	if l == "" {
		l = appliance.DefaultLayout(in.target)
	}
	o := in.options(l, *out, log.Printf)
	o.DiscardState = *discard
	if o.ImageKey, err = imageKey(*cfgPath, *keyPath); err != nil {
		return err
	}
	res, err := appliance.BuildImage(ctx, o)
	if err != nil {
		return err
	}
	log.Printf("built %s (%s layout, %s): %s", *out, l, res.Target, res.Cmdline)
	if *asJSON {
		return cli.JSON(c.Stdout, res)
	}
	return nil
}
