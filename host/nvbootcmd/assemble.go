package nvbootcmd

import (
	"context"
	"fmt"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/internal/cli"
)

const assembleDescription = `Writes an appliance's images from a root tree another build system filled
(Buildroot's TARGET_DIR, Yocto's IMAGE_ROOTFS), the way 'nvboot build' writes
them from its own: pmem-text.img (the text store: the texts /etc/nvboot/MANIFEST
lists, taken from /lib/off2f), pmem-state.img (a blank state filesystem), and
the root filesystem (erofs), the GPT disk.img (EFI system partition with the
unified kernel image, root, data), bzImage and image.json. For the same tree
the bytes are those of 'nvboot build'.

ROOT must hold the programs already converted to OFF2F (rootfs/off2f-programs.sh
does it, with the off2f command), their texts in ROOT/lib/off2f, the MANIFEST
and nvinit's config ROOT/etc/nvboot/config.json, whose Hostname seeds the
filesystem uuids. Without -in-place ROOT is copied and left as it is, and the
copy gets the provisioning images (/lib/nvboot/textstore.ext4,
state.ext4.gz) nvinit writes onto blank pmem. With -in-place they are written
into ROOT itself and only the pmem images into DIR: for a build system that
makes the root filesystem and the disk itself (Yocto's wic).

DIR is treated as by 'nvboot build': created, or replaced when it holds an
earlier build and nothing else.`

const assembleExamples = `  nvboot assemble -root output/target -kernel output/images/bzImage -o output/images/nvboot
  nvboot assemble -root output/target -kernel bzImage -cmdline root=PARTLABEL=root -o out/efi
  nvboot assemble -in-place -root $IMAGE_ROOTFS -o $WORKDIR/nvboot-pmem`

func assembleCmd(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "nvboot assemble", "nvboot assemble -root ROOT [-kernel BZIMAGE | -in-place] -o DIR", assembleDescription, assembleExamples)
	root := fs.String("root", "", "root `tree` with the programs converted (required)")
	out := fs.String("o", "", "output `directory` (required)")
	kernel := fs.String("kernel", "", "`bzImage` for the unified kernel image (required without -in-place)")
	inPlace := fs.Bool("in-place", false, "write the provisioning images into ROOT and only the pmem images into DIR")
	cmdline := fs.String("cmdline", "", "`parameters` added to the kernel command line (a later root= wins over "+contract.RootDevice+")")
	storeMiB := fs.Int("text-store-mib", 0, "text store filesystem size in `MiB` (0: fitted to the texts)")
	stateMiB := fs.Int("state-mib", 0, "state image size in `MiB`, rounded up to a multiple of 128 (0: the default, 128)")
	asJSON := fs.Bool("json", false, "print image.json on stdout when done")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return cli.Usagef("unexpected arguments %q", fs.Args())
	case *root == "":
		return cli.Usagef("-root ROOT is required")
	case *out == "":
		return cli.Usagef("-o DIR is required")
	case *inPlace == (*kernel != ""):
		return cli.Usagef("give -kernel (the whole image) or -in-place (pmem images only), not both or neither")
	case *storeMiB < 0 || *storeMiB%2 != 0 || *stateMiB < 0 || *stateMiB%2 != 0:
		return cli.Usagef("-text-store-mib and -state-mib: a positive multiple of 2 (or 0: the default)")
	}
	log := cli.NewProgress(c.Stderr)
	im, err := appliance.Assemble(ctx, appliance.AssembleOptions{Root: *root, Out: *out, Kernel: *kernel, InPlace: *inPlace,
		KernelCmdline: *cmdline, TextStoreMiB: *storeMiB, StateMiB: *stateMiB, Logf: log.Printf})
	if err != nil {
		return fmt.Errorf("assembling from %s: %w", *root, err)
	}
	log.Printf("assembled %s from %s", *out, *root)
	if *asJSON {
		return cli.JSON(c.Stdout, im)
	}
	return nil
}
