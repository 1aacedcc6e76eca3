package nvbootcmd

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/flash"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/internal/cli"
)

const flashDescription = `Writes the disk image of an image built by 'nvboot build' (DIR/disk.img) onto
TARGET, an SD card, eMMC or USB device (/dev/sdX, /dev/mmcblkN) or a regular
file, then reads it back past the page cache and compares.

Before writing, TARGET is checked. A block device must be big enough, not
mounted (nor any of its partitions), not held by the kernel (O_EXCL), and is
only overwritten with -yes, after nvboot has said what it is. A regular file
is created if it does not exist, and grown to the image's size if smaller
(a bigger one keeps its size, as a bigger card would); an existing one is
overwritten without -yes only if it is empty, all zeros, or a disk image
already (it holds a partition table: an earlier flash). Anything else needs
-yes, and no file of an image directory (one with image.json or disk.img:
the pmem images beside the disk) is ever a target.

A block device is written in place: the old partition tables are wiped
first and the new one is written last, so an interrupted flash leaves a
device with no table rather than one that points at half-written
partitions. A regular file is written to a new file beside it, verified,
and only then renamed over it, so an interrupted flash leaves the old file
as it was (its file system needs room for both meanwhile). On a bigger device the GPT backup moves to its end; the
partitions keep their sizes.

The pmem images need no flashing: on the device's first boot nvinit finds its
pmem (an NVDIMM, CXL memory or a memmap= region) blank and provisions the
text store and the state filesystem from their copies on the root filesystem
(switching a raw namespace to fsdax first). The state device is written only
when every byte of it is zero (or it holds only what a provisioning cut short
left): one that holds anything else and does not mount is left as it is.`

const flashExamples = `  nvboot flash out/demo card.img                 # a file (created): another tool writes it later
  lsblk -d -o NAME,SIZE,MODEL,TRAN                # find the card
  sudo nvboot flash -yes out/demo /dev/sdX
  nvboot flash -yes -json out/demo /dev/mmcblk0 | jq .sha256`

func flashCmd(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "nvboot flash", "nvboot flash [-yes] [-json] DIR TARGET", flashDescription, flashExamples)
	yes := fs.Bool("yes", false, "overwrite TARGET when it is a block device, or a file that holds something other than a disk image")
	asJSON := fs.Bool("json", false, "print the result (target, bytes, sha256, verified, seconds) as JSON")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return cli.Usagef("want an image directory and a target")
	}
	dir, target := fs.Arg(0), fs.Arg(1)
	if _, err := appliance.ReadImage(dir); err != nil {
		return err
	}
	t, err := flash.Describe(target)
	if err != nil {
		return err
	}
	log := cli.NewProgress(c.Stderr)
	log.Printf("target %s", t)
	var last time.Time
	res, err := flash.Write(ctx, flash.Options{
		Image: filepath.Join(dir, outdir.DiskFile), Target: target, Confirmed: *yes,
		Progress: func(stage string, done, total int64) {
			if time.Since(last) >= time.Second || done == total {
				last = time.Now()
				log.Printf("%s %d/%d MiB", stage, done>>20, total>>20)
			}
		},
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w: %w", interrupted(ctx), err) // how far it got matters
	}
	if err != nil {
		return err
	}
	log.Printf("flashed %s: %d MiB written in %.1fs, read back and verified in %.1fs (sha256 %s)",
		target, res.ImageBytes>>20, res.WriteSec, res.VerifySec, res.SHA256[:16])
	if *asJSON {
		return cli.JSON(c.Stdout, res)
	}
	return nil
}
