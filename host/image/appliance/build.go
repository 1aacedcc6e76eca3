package appliance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/image/rpi"
)

// builder is one Build: the options, the output directory being filled and
// the scratch directory under it.
type builder struct {
	Options
	dir  string
	work string
	// uncompressed is the kernel's PVH vmlinux beside Options.Kernel, "":
	// none (then the image has no kernel region).
	uncompressed string
	// rpi are a Pi image's kernel, firmware and EEPROM packages.
	rpi *rpi.Parts
}

// The build runs in phases, one file each, as gokrazy's packer splits its
// work: prepare (the staging trees, the device configs), programs (go build,
// ld-off2f), place (the programs, manifests and configs on the root tree),
// store (the text store on pmem0), state (the state on pmem1) and disk (the
// root filesystem or initramfs, the ESP, the GPT disk). Each phase takes
// what the earlier ones made and fills in its part of the Image.
func (b *builder) build(ctx context.Context) (*Image, error) {
	if err := b.rpiParts(ctx); err != nil { // rpidisk.go: before anything is compiled
		return nil, err
	}
	st, dev, err := b.prepare()
	if err != nil {
		return nil, err
	}
	progs, loader, err := b.buildPrograms(ctx)
	if err != nil {
		return nil, err
	}
	im := &Image{Layout: b.Layout, Hostname: b.Config.HostnameOrDefault(), Kernel: outdir.KernelFileOf(b.Target.GOARCH()), Disk: outdir.DiskFile,
		Pmem: []string{outdir.TextPmemFile, outdir.StatePmemFile}, Arch: b.Target.GOARCH(), Target: b.Target}
	if b.Board == BoardRPi {
		im.Kernel, im.Pmem = "", nil
	}
	if err := b.place(progs, loader, dev, st, im); err != nil {
		return nil, err
	}
	if b.Board == BoardPC {
		if err := b.textStore(ctx, st); err != nil {
			return nil, err
		}
	}
	if err := b.state(ctx, st, im); err != nil {
		return nil, err
	}
	if err := b.disk(ctx, st, im); err != nil {
		return nil, err
	}
	if err := b.writeImage(im); err != nil {
		return nil, err
	}
	return im, nil
}

// writeImage writes image.json and the stamp that marks the directory as
// nvboot's output (CheckOut).
func (b *builder) writeImage(im *Image) error {
	if err := writeJSON(filepath.Join(b.dir, outdir.ManifestFile), im); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.dir, outdir.StampFile), []byte(stampText), 0o644)
}

// seed makes the uuids of one image: the layout and hostname, so two layouts
// of one config do not share filesystem uuids.
func (b *builder) seed() string { return string(b.Layout) + "/" + b.Config.HostnameOrDefault() }

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
