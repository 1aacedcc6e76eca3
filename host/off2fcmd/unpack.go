package off2fcmd

import (
	"context"
	"fmt"
	"os"

	"github.com/nvboot/nvboot/internal/atomicfile"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/off2f"
)

func unpack(_ context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "unpack", "off2f unpack [-store DIR] -o OUT FILE",
		`Rebuilds a plain executable from the OFF2F header file FILE and its text:
every loadable segment of the original, byte-identical, at its original file
offset. Section headers and symbols are not part of an OFF2F program (as after
strip), so they are not restored. The text's hash is checked first.`,
		`  off2f unpack -o hello hello.off2f
  off2f unpack -store /mnt/pmem/text -o app.elf /usr/bin/app`)
	storeDir := fs.String("store", "", "text store `DIR` (default: the store path in the note)")
	out := fs.String("o", "", "executable to write (required)")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *out == "" {
		return cli.Usagef("unpack takes -o OUT and one header file")
	}
	path := fs.Arg(0)
	if err := checkOutPath("-o", *out); err != nil {
		return fmt.Errorf("unpack %s: %w", path, err)
	}
	hdr, err := readHeader("unpack", path, *storeDir)
	if err != nil {
		return err
	}
	text, err := os.ReadFile(hdr.text)
	if err != nil {
		return fmt.Errorf("unpack %s: text: %w", path, err)
	}
	elf, err := off2f.Unpack(hdr.raw, text)
	if err != nil {
		return fmt.Errorf("unpack %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(*out, elf, 0o755); err != nil {
		return fmt.Errorf("unpack %s: %w", path, err)
	}
	fmt.Fprintf(c.Stdout, "%s: wrote %s (%d bytes)\n", path, *out, len(elf))
	return nil
}
