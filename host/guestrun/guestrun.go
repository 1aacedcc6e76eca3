package guestrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/format/fsdax"
	"github.com/nvboot/nvboot/host/kernel"
	"github.com/nvboot/nvboot/internal/checkout"
)

// Kernel returns the guest kernel (host/kernel's one order: -kernel,
// $NVBOOT_KERNEL, then kernel-config/'s cache in the checkout; never built
// here: make kernel does, in about ten minutes) once QEMU is there.
func Kernel(flagKernel string) (string, error) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return "", fmt.Errorf("no qemu-system-x86_64 (apt-get install qemu-system-x86): %w", err)
	}
	root, err := checkout.Root(context.Background(), "")
	if err != nil {
		return "", err
	}
	return kernel.Find(context.Background(), kernel.Lookup{Paths: []kernel.Source{{From: "-kernel", Path: flagKernel}}, Root: root})
}

// BuildStatic builds the package pkg (./bench/omf) for the guest into out.
func BuildStatic(ctx context.Context, pkg, out string) error {
	root, err := checkout.Root(ctx, "")
	if err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOWORK=off")
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the guest's measurer (CGO_ENABLED=0 go build %s in %s): %w\n%s", pkg, root, err, b)
	}
	return nil
}

// FsdaxImage writes an NVDIMM image of size bytes to dir/fsdax.img: a PFN
// info block, so the kernel finds an fsdax namespace at boot, and an empty
// ext4 (4 KiB blocks) filling the rest, for mount -o dax=always. mkfsOpts
// go to mkfs.ext4 (AlignedDAX, say).
func FsdaxImage(ctx context.Context, dir string, size int64, mkfsOpts ...string) (string, error) {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return "", fmt.Errorf("no mkfs.ext4 (apt-get install e2fsprogs): %w", err)
	}
	info, err := fsdax.NewInfo(size, [16]byte{})
	if err != nil {
		return "", err
	}
	fs := filepath.Join(dir, "nv.ext4")
	args := append(append([]string{"-q", "-F", "-b", "4096", "-L", "nv"}, mkfsOpts...), fs, fmt.Sprintf("%dk", (size-int64(info.DataOff))>>10))
	mkfs := exec.CommandContext(ctx, "mkfs.ext4", args...)
	if out, err := mkfs.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mkfs.ext4 %s: %w\n%s", fs, err, out)
	}
	img := filepath.Join(dir, "fsdax.img")
	if err := fsdax.WriteImage(img, size, fs); err != nil {
		return "", err
	}
	return img, os.Remove(fs)
}

// AlignedDAX is mkfs.ext4's options for an ext4 whose large files start
// on 2 MiB of the device: a RAID stripe of 512 4-KiB blocks, which ext4's
// block allocator aligns allocations of whole stripes to. The PFN block
// puts the filesystem's start 2 MiB-aligned in physical memory, so a DAX
// fault on a 2 MiB-aligned part of such a file can map it with one PMD
// entry instead of 512 page entries (XFS's equivalent is su=2m,sw=1).
var AlignedDAX = []string{"-E", "stride=512,stripe_width=512"}

// ParseOutput finds the one line of console that holds begin, a JSON
// benchjson.Output, and end, and decodes it (unknown fields refused).
func ParseOutput(console, begin, end string) (benchjson.Output, error) {
	var o benchjson.Output
	for _, l := range strings.Split(console, "\n") {
		i := strings.Index(l, begin)
		j := strings.LastIndex(l, end)
		if i < 0 || j < i {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(l[i+len(begin) : j]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return o, fmt.Errorf("the guest's JSON: %w", err)
		}
		return o, nil
	}
	return o, fmt.Errorf("the guest printed no %s…%s line", begin, end)
}

// Plan decides a benchmark's guest part from its -guest flag (auto, on,
// off, only) and returns the kernel, or "" when the part is skipped: with
// -guest off, or with auto when the guest cannot run here or quick is set
// (the reason then goes to progress, prefixed with bench). mkfs.ext4 is
// checked too: every guest here needs it.
func Plan(mode, flagKernel string, quick bool, bench string, progress io.Writer) (string, error) {
	switch mode {
	case "off":
		return "", nil
	case "auto", "on", "only":
	default:
		return "", fmt.Errorf("-guest %q: want auto, on, off or only", mode)
	}
	kernel, err := Kernel(flagKernel)
	if err == nil {
		if _, e := exec.LookPath("mkfs.ext4"); e != nil {
			err = fmt.Errorf("no mkfs.ext4 (apt-get install e2fsprogs): %w", e)
		}
	}
	if err == nil && mode == "auto" && quick {
		err = errors.New("-quick (add -guest on to include it)")
	}
	if err != nil {
		if mode != "auto" {
			return "", fmt.Errorf("-guest %s: %w", mode, err)
		}
		fmt.Fprintf(progress, "%s: skipping the guest part: %v\n", bench, err)
		return "", nil
	}
	return kernel, nil
}

// HideLines passes what is written to w, except writes that contain
// marker (the guest's JSON line, printed on stdout at the end instead).
type HideLines struct {
	W      io.Writer
	Marker string
}

func (h HideLines) Write(b []byte) (int, error) {
	if strings.Contains(string(b), h.Marker) {
		return len(b), nil
	}
	return h.W.Write(b)
}
