package appliance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// A flashed device's first boot: the kernel region is blank, so the
// firmware boots the card's bzImage and says so; nvinit writes the root's
// uncompressed kernel into the region once kv is ready, and the next boot
// copies the kernel from pmem and serves the same.
func TestKernelRegionRewritten(t *testing.T) {
	buildtest.NeedTools(t)
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	dir := filepath.Join(t.TempDir(), "demo")
	im := buildLayout(t, config.Demo(), OFF2F, dir, k)
	if im.Uncompressed == "" {
		t.Skipf("kernel %s has no uncompressed vmlinux beside it (a kernel-config/build.sh kernel has)", k)
	}
	kernelRegionRewritten(t, dir, im, contract.KernelImage)
}

// The same on the arm64 board: the region, a device-tree pmem region,
// holds the Image; nvinit writes it from the root's /lib/nvboot/Image.
func TestKernelRegionRewrittenArm64(t *testing.T) {
	needArm64Tools(t)
	k := vmtest.KernelArm64(t, "qemu-system-aarch64")
	cfg := config.Demo()
	cfg.Environment = []string{"GOOS=linux", "GOARCH=arm64"}
	dir := filepath.Join(t.TempDir(), "demo")
	im := buildLayout(t, cfg, OFF2F, dir, k)
	if im.Uncompressed != im.Kernel {
		t.Fatalf("an arm64 image's region holds %q, want its Image", im.Uncompressed)
	}
	kernelRegionRewritten(t, dir, im, contract.KernelImageArm64)
}

// kernelRegionRewritten blanks the built image's region, boots it from the
// card, and checks that nvinit wrote kimage into the region and that the
// next boot takes the kernel from it.
func kernelRegionRewritten(t *testing.T, dir string, im *Image, kimage string) {
	region := filepath.Join(dir, outdir.KernelPmemFile)
	if err := os.Truncate(region, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(region, kernelRegionSize); err != nil {
		t.Fatal(err)
	}
	if c, err := ChooseKernel(dir, im, ""); err != nil || c.From != contract.KernelFromCard || !strings.Contains(c.Why, "blank") {
		t.Fatalf("blank region: %+v, %v; want the card's kernel", c, err)
	}
	b := startImage(t, dir, "")
	b.expect(t, "NVBOOT-MARK service-ready kv")
	b.expect(t, "kernel region: wrote "+kimage)
	if code, _ := b.do(t, "PUT", "/kv/boot", "from the card"); code/100 != 2 {
		t.Fatalf("PUT: %d", code)
	}
	b.poweroff(t)

	c, err := ChooseKernel(dir, im, "")
	if err != nil || c.From != contract.KernelFromPmem {
		t.Fatalf("after nvinit wrote the region: %+v, %v; want the region's kernel", c, err)
	}
	b = startImage(t, dir, "")
	b.expect(t, "NVBOOT-MARK service-ready kv")
	if code, v := b.do(t, "GET", "/kv/boot", ""); code != 200 || v != "from the card" {
		t.Fatalf("GET after the boot from pmem: %d %q", code, v)
	}
	if strings.Contains(b.m.Console(), "kernel region: wrote") {
		t.Errorf("the boot from pmem rewrote the region:\n%s", b.m.Console())
	}
	b.poweroff(t)
}
