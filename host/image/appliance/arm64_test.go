package appliance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/gpt"
	"github.com/nvboot/nvboot/format/kernelpmem"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
	"github.com/nvboot/nvboot/off2f"
)

// needArm64Tools skips t unless an arm64 image can be built here: the
// cross gcc and objcopy, and the arm64 EFI stub.
func needArm64Tools(t *testing.T) {
	t.Helper()
	buildtest.NeedTools(t)
	if err := config.CheckTools(config.Demo().Tools(config.Needs{RootImage: true, Loader: true, Target: config.TargetVirt})); err != nil {
		t.Skip(err)
	}
}

// TestBuildArm64: examples/kv's config (the demo) with GOARCH=arm64 in its
// Environment, gokrazy's way, builds an image for the virt board whose
// every program is aarch64: nvinit, kv and the loader, header files and
// texts; image.json says arm64; the disk is an arm64 UEFI disk (root of the
// arm64 type, BOOTAA64.EFI with the PL011 console, no x86 boot trims; the
// Image in the kernel region, pmem2); the same inputs give the same bytes; kv, unpacked from
// its header file and text, runs under qemu-aarch64-static; VMConfig boots
// it on the virt board.
func TestBuildArm64(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-builds Go programs and the loader")
	}
	needArm64Tools(t)
	k := buildtest.FakeKernelFor(t, "arm64")
	cfg := config.Demo()
	cfg.Environment = []string{"GOOS=linux", "GOARCH=arm64"}
	dir := filepath.Join(t.TempDir(), "img")
	im := buildLayout(t, cfg, OFF2F, dir, k)
	if im.Arch != "arm64" || im.Target != config.TargetVirt {
		t.Errorf("Arch %q Target %q, want arm64 arm64-virt", im.Arch, im.Target)
	}
	back, err := ReadImage(dir)
	if err != nil || back.Arch != "arm64" || back.Target != config.TargetVirt {
		t.Errorf("image.json read back: %+v, %v", back, err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, im.Kernel)); im.Kernel != "Image" || err != nil || !bytes.Equal(got, readBytes(t, k)) {
		t.Errorf("kernel file %q (%v): want the arm64 Image as Image", im.Kernel, err)
	}
	if strings.Contains(im.Cmdline, "acpi=noirq") || !strings.Contains(im.Cmdline, BootTrimsArm64) {
		t.Errorf("command line %q: want the arm64 trims only", im.Cmdline)
	}
	// The kernel region holds the Image itself (already uncompressed), as
	// pmem2; the root keeps the copy nvinit rewrites it from.
	if h, err := kernelpmem.CheckFile(filepath.Join(dir, outdir.KernelPmemFile)); err != nil || im.Uncompressed != "Image" ||
		len(im.Pmem) != 3 || im.Pmem[2] != outdir.KernelPmemFile || fmt.Sprintf("%x", h.Sum) != im.UncompressedSHA256 ||
		h.Sum != sha256.Sum256(readBytes(t, k)) {
		t.Errorf("kernel region: %q %v %v: want the Image in pmem2", im.Uncompressed, im.Pmem, err)
	}

	root := extractRoot(t, dir, im)
	if !bytes.Equal(readBytes(t, filepath.Join(root, contract.KernelImageArm64[1:])), readBytes(t, k)) {
		t.Errorf("the root's %s is not the Image", contract.KernelImageArm64)
	}
	elfMachine := func(p string) elf.Machine {
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return f.Machine
	}
	if m := elfMachine(filepath.Join(root, contract.Loader[1:])); m != elf.EM_AARCH64 {
		t.Errorf("the loader is %v", m)
	}
	headers := map[string]string{"nvinit": contract.Init, "kv": contract.BinDir + "/kv"}
	for name, p := range headers {
		raw, err := os.ReadFile(filepath.Join(root, p[1:]))
		if err != nil {
			t.Fatal(err)
		}
		h, err := off2f.ParseHeader(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m := elfMachine(filepath.Join(root, p[1:])); m != elf.EM_AARCH64 || h.Note.Machine != off2f.MachineARM64 {
			t.Errorf("%s: ELF machine %v, note %v, want aarch64", name, m, h.Note.Machine)
		}
		text, err := os.ReadFile(filepath.Join(root, contract.FallbackDir[1:], off2f.HashName(h.Note.Hash)))
		if err != nil {
			t.Fatal(err)
		}
		th, err := off2f.ParseText(text)
		if err != nil || th.Machine != off2f.MachineARM64 {
			t.Errorf("%s's text: %v %v, want aarch64", name, th, err)
		}
		if !strings.Contains(checkStore(t, filepath.Join(dir, im.Pmem[0])), off2f.HashName(h.Note.Hash)) {
			t.Errorf("%s's text is not in the text store", name)
		}
		if name == "kv" {
			runUnpacked(t, raw, text)
		}
	}

	f, err := os.Open(filepath.Join(dir, im.Disk))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gpt.Read(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tab.Partitions {
		if p.Name == "root" && p.Type != gpt.TypeRootArm64 {
			t.Errorf("root partition type %v, want arm64's %v", p.Type, gpt.TypeRootArm64)
		}
	}
	checkESP(t, dir, im, k)

	again := filepath.Join(t.TempDir(), "img")
	buildLayout(t, cfg, OFF2F, again, k)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		x, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		y, _ := os.ReadFile(filepath.Join(again, e.Name()))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds of the same inputs", e.Name())
		}
	}

	if c, err := VMConfig(dir, im, BootOptions{}); err != nil || c.Arch != "arm64" || len(c.NVDIMMs) != 3 ||
		!strings.Contains(c.Cmdline, contract.KernelFromParam+"="+contract.KernelFromPmem) {
		t.Errorf("VMConfig of an arm64 image: %v, arch %q, %d regions, %q: want the virt board booting the region's kernel", err, c.Arch, len(c.NVDIMMs), c.Cmdline)
	}
}

func readBytes(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runUnpacked runs the program of an OFF2F header file and text, unpacked
// to its ELF, under qemu-aarch64-static with -help: Go's flag package
// prints its flags, which says the aarch64 program ran.
func runUnpacked(t *testing.T, header, text []byte) {
	t.Helper()
	qemu, err := exec.LookPath("qemu-aarch64-static")
	if err != nil {
		t.Log("qemu-aarch64-static not installed: kv not run")
		return
	}
	raw, err := off2f.Unpack(header, text)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "kv")
	if err := os.WriteFile(bin, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(qemu, bin, "-help").CombinedOutput()
	if !strings.Contains(string(out), "-heap") {
		t.Errorf("kv -help under qemu-aarch64-static:\n%s", out)
	}
}

// TestBuildRefusesMixedMachines: a service whose GoBuildEnvironment names
// another GOARCH than the image's is refused before anything is built,
// naming both; so is what a Raspberry Pi cannot boot (a layout that needs
// pmem, a kernel not its package's) and a Pi board with another target.
func TestBuildRefusesMixedMachines(t *testing.T) {
	cfg := config.Demo()
	pc := cfg.PackageConfig["github.com/nvboot/nvboot/examples/kv"]
	pc.GoBuildEnvironment = []string{"GOARCH=amd64"}
	cfg.PackageConfig["github.com/nvboot/nvboot/examples/kv"] = pc
	out := filepath.Join(t.TempDir(), "img")
	_, err := Build(context.Background(), Options{Config: cfg, Layout: OFF2F, Target: config.TargetVirt, Out: out, Kernel: buildtest.FakeKernelFor(t, "arm64")})
	if err == nil || !strings.Contains(err.Error(), `GoBuildEnvironment[0] "GOARCH=amd64": the image is built for arm64`) {
		t.Errorf("an amd64 service in an arm64 image: %v", err)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Layout: OFF2F, Target: config.TargetRPi}, "layout off2f on a Raspberry Pi: a Pi has no persistent memory"},
		{Options{Layout: ELF, Target: config.TargetRPi, Kernel: buildtest.FakeKernelFor(t, "arm64")}, "a Pi boots KernelPackage's kernel"},
		{Options{Layout: ELF, Target: config.TargetVirt, Board: BoardRPi}, "board rpi with target arm64-virt"},
	} {
		tc.o.Config, tc.o.Out = config.Demo(), out
		if _, err := Build(context.Background(), tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s %s: %v, want %q", tc.o.Target, tc.o.Board, tc.o.Layout, err, tc.want)
		}
	}
	_, err = Build(context.Background(), Options{Config: config.Demo(), Layout: OFF2F, Target: config.TargetVirt, Out: out, Kernel: buildtest.FakeKernel(t)})
	if err == nil || !strings.Contains(err.Error(), "is an x86 bzImage, not an arm64 Image") {
		t.Errorf("an x86 kernel in an arm64 image: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused build left %s: %v", out, err)
	}
}
