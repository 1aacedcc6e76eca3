package appliance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/kernelpmem"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
)

// ChooseKernel is the firmware's choice: the region's kernel only when it
// is intact and the one the image names, the card's bzImage otherwise.
func TestChooseKernel(t *testing.T) {
	elfFile, err := os.ReadFile("/bin/true") // any x86-64 ELF: its loaded segments are counted
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	region := func(k []byte) {
		t.Helper()
		f, err := os.Create(filepath.Join(dir, outdir.KernelPmemFile))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(kernelRegionSize); err != nil {
			t.Fatal(err)
		}
		if k != nil {
			if err := kernelpmem.Write(f, kernelRegionSize, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(outdir.KernelFile, []byte("bzImage"))
	write(outdir.UncompressedFile, elfFile)
	im := &Image{Kernel: outdir.KernelFile, Uncompressed: outdir.UncompressedFile,
		UncompressedSHA256: fmt.Sprintf("%x", kernelpmem.For(elfFile).Sum)}

	region(elfFile)
	k, err := ChooseKernel(dir, im, "")
	if err != nil || k.From != contract.KernelFromPmem || k.Path != filepath.Join(dir, outdir.UncompressedFile) || k.LoadBytes <= 0 {
		t.Fatalf("intact region: %+v, %v", k, err)
	}
	for what, c := range map[string]struct {
		region []byte
		why    string
	}{
		"blank":   {nil, "blank"},
		"another": {[]byte("an older image's kernel"), "another kernel"},
	} {
		region(c.region)
		k, err := ChooseKernel(dir, im, "")
		if err != nil || k.From != contract.KernelFromCard || k.Path != filepath.Join(dir, outdir.KernelFile) || !strings.Contains(k.Why, c.why) {
			t.Errorf("%s region: %+v, %v; want the card's kernel because %q", what, k, err, c.why)
		}
	}
	// Boards whose firmware does not read the region boot the card's
	// kernel and tell nvinit nothing.
	region(elfFile)
	for _, o := range []BootOptions{{BootDisk: true}, {PmemAs: vm.PmemNVDIMM}} {
		if k, err := BootKernelOf(dir, im, o); err != nil || k.From != "" || k.Path != filepath.Join(dir, outdir.KernelFile) {
			t.Errorf("%+v: %+v, %v; want the card's kernel, unannounced", o, k, err)
		}
	}
	if k, err := BootKernelOf(dir, im, BootOptions{}); err != nil || k.From != contract.KernelFromPmem {
		t.Errorf("the default board: %+v, %v; want the region's kernel", k, err)
	} else if d := k.Describe(); !strings.Contains(d, "kernel region") {
		t.Errorf("Describe: %q", d)
	}
	write(outdir.UncompressedFile, append(elfFile, 0))
	if _, err := ChooseKernel(dir, im, ""); err == nil || !strings.Contains(err.Error(), "rebuild") {
		t.Errorf("the image's vmlinux changed: %v", err)
	}
	if k, err := ChooseKernel(dir, &Image{Kernel: outdir.KernelFile}, ""); err != nil || k.From != "" || k.Path != filepath.Join(dir, outdir.KernelFile) {
		t.Errorf("an image without a region: %+v, %v", k, err)
	}
}
