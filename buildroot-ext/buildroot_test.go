// Package buildroot holds the checks of the BR2_EXTERNAL tree against the
// vendored Buildroot release, and runs its board scripts on real inputs.
// buildroot-ext/README.md describes the tree and its tests.
package buildroot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildertest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
	"github.com/nvboot/nvboot/internal/testutil/vendortree"
)

const release = "buildroot-2026.02.3"

func ext(t testing.TB) string { return filepath.Join(buildertest.Root(t), "buildroot-ext") }

// brMake runs Buildroot's make in the vendored tree with the output in out.
func brMake(t *testing.T, br, out string, args ...string) string {
	t.Helper()
	for _, tool := range []string{"make", "gcc", "perl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: Buildroot's make needs it", tool)
		}
	}
	return buildertest.Run(t, br, nil, "make", append([]string{"-s", "O=" + out, "BR2_EXTERNAL=" + ext(t)}, args...)...)
}

// TestDefconfigs: each defconfig of the tree loads with BR2_EXTERNAL into a
// configuration that has the nvboot packages and the kernel fragments from
// kernel-config/.
func TestDefconfigs(t *testing.T) {
	br := vendortree.Tree(t, release)
	defs, _ := filepath.Glob(filepath.Join(ext(t), "configs", "*_defconfig"))
	if len(defs) != 2 {
		t.Fatalf("configs: %q, want the QEMU and the EFI defconfig", defs)
	}
	for _, d := range defs {
		name := filepath.Base(d)
		t.Run(name, func(t *testing.T) {
			out := t.TempDir()
			brMake(t, br, out, name)
			cfg, err := os.ReadFile(filepath.Join(out, ".config"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"BR2_PACKAGE_NVBOOT=y", "BR2_PACKAGE_NVBOOT_KV=y", "BR2_PACKAGE_LD_OFF2F=y",
				"BR2_PACKAGE_HOST_NVBOOT=y", `BR2_PACKAGE_NVBOOT_OFF2F_PROGRAMS="/sbin/nvinit /bin/poold /bin/kv"`,
				"BR2_INIT_NONE=y", "BR2_PACKAGE_CA_CERTIFICATES=y", `BR2_LINUX_KERNEL_CONFIG_FRAGMENT_FILES="$(BR2_EXTERNAL_NVBOOT_PATH)/../kernel-config/common.config $(BR2_EXTERNAL_NVBOOT_PATH)/../kernel-config/x86_64.config"`} {
				if !bytes.Contains(cfg, []byte("\n"+want+"\n")) {
					t.Errorf("%s: .config lacks %s", name, want)
				}
			}
		})
	}
}

// TestShowInfo: make show-info lists the nvboot packages with the
// dependencies their .mk files declare.
func TestShowInfo(t *testing.T) {
	br := vendortree.Tree(t, release)
	out := t.TempDir()
	brMake(t, br, out, "nvboot_qemu_x86_64_defconfig")
	js := brMake(t, br, out, "show-info")
	var info map[string]struct {
		Type         string
		Version      string
		Dependencies []string
	}
	if err := json.Unmarshal([]byte(js), &info); err != nil {
		t.Fatalf("show-info: %v", err)
	}
	want := map[string][]string{
		"nvboot":      {"host-go", "host-nvboot", "ld-off2f", "toolchain"},
		"host-nvboot": {"host-go", "host-e2fsprogs", "host-erofs-utils", "host-dosfstools", "host-mtools"},
		"nvboot-kv":   {"host-go", "toolchain"},
		"ld-off2f":    {"toolchain"},
		"linux":       {"host-lz4"},
	}
	for pkg, deps := range want {
		p, ok := info[pkg]
		if !ok {
			t.Errorf("show-info does not list %s", pkg)
			continue
		}
		for _, d := range deps {
			if !slices.Contains(p.Dependencies, d) {
				t.Errorf("%s: dependencies %q lack %s", pkg, p.Dependencies, d)
			}
		}
	}
	if v := info["linux"].Version; v != "6.1.174" {
		t.Errorf("linux %s, want 6.1.174 (the 6.1 series kernel-config/ is written for)", v)
	}
}

// TestCheckPackage: Buildroot's utils/check-package has nothing to say
// about any file of the tree.
func TestCheckPackage(t *testing.T) {
	br := vendortree.Tree(t, release)
	py := "python3"
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		py = "/usr/bin/python3" // Debian's, with python3-magic and python3-flake8 (ci/deps.sh)
	}
	if out, err := exec.Command(py, "-c", "import magic, flake8").CombinedOutput(); err != nil {
		t.Skipf("check-package needs the Python modules magic and flake8 (Debian python3-magic python3-flake8): %s", out)
	}
	var files []string
	err := filepath.WalkDir(ext(t), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".go") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	out := buildertest.Run(t, br, nil, py, append([]string{"utils/check-package", "-b"}, files...)...)
	if !strings.Contains(out, "0 warnings generated") {
		t.Errorf("check-package:\n%s", out)
	}
}

// hooks is one run of the board scripts as Buildroot runs them.
type hooks struct {
	target, binaries, build, host, config string
}

func newHooks(t *testing.T, target string, programs string, storeMiB int) *hooks {
	t.Helper()
	tmp := t.TempDir()
	h := &hooks{target: target, binaries: filepath.Join(tmp, "images"), build: filepath.Join(tmp, "build"),
		host: buildertest.HostTools(t), config: filepath.Join(tmp, ".config")}
	kdir := filepath.Join(h.build, "linux-6.1.174")
	if err := os.MkdirAll(kdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(h.binaries, 0o755); err != nil {
		t.Fatal(err)
	}
	kc, err := os.ReadFile(buildertest.KernelConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(kdir, ".config"), kc, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "BR2_PACKAGE_NVBOOT=y\nBR2_PACKAGE_NVBOOT_OFF2F_PROGRAMS=\"" + programs + "\"\n" +
		"BR2_PACKAGE_NVBOOT_TEXT_STORE_MIB=" + itoa(storeMiB) + "\n"
	if err := os.WriteFile(h.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

func itoa(n int) string { return strconv.Itoa(n) }

func (h *hooks) env(t *testing.T) []string {
	return []string{"TARGET_DIR=" + h.target, "BINARIES_DIR=" + h.binaries, "BUILD_DIR=" + h.build, "HOST_DIR=" + h.host,
		"BR2_CONFIG=" + h.config, "BR2_EXTERNAL_NVBOOT_PATH=" + ext(t), "NVBOOT_KERNEL_CONFIG="}
}

// postBuild and postImage run the scripts; they return the output and the error.
func (h *hooks) postBuild(t *testing.T) (string, error) {
	return buildertest.Output(h.target, h.env(t), filepath.Join(ext(t), "board", "nvboot", "post-build.sh"), h.target)
}

func (h *hooks) postImage(t *testing.T, kernel string) (string, error) {
	b, err := os.ReadFile(kernel)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.binaries, "bzImage"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return buildertest.Output(h.binaries, h.env(t), filepath.Join(ext(t), "board", "nvboot", "post-image.sh"), h.binaries)
}

// kernel is the real kernel when there is one (the image then boots), else
// a stand-in: the bytes compared are the same either way.
func kernel(t *testing.T) string {
	if k := os.Getenv("NVBOOT_KERNEL"); k != "" && !testing.Short() {
		return k
	}
	return buildtest.FakeKernel(t)
}

// TestHooksMatchNvbootBuild runs post-build.sh and post-image.sh on a
// target directory holding the real nvinit, kv and loader, as Buildroot's
// packages install them, and compares what they write with nvboot build's
// image of the same appliance (rootfs/appliance/appliance.json): disk.img,
// pmem-text.img and pmem-state.img are byte-identical.
func TestHooksMatchNvbootBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds appliance images (-short)")
	}
	buildtest.NeedTools(t)
	k := kernel(t)
	progs := buildertest.Programs(t)
	h := newHooks(t, buildertest.Target(t, progs, false), "/sbin/nvinit /bin/kv", 0)
	if out, err := h.postBuild(t); err != nil {
		t.Fatalf("post-build.sh: %v\n%s", err, out)
	}
	if out, err := h.postImage(t, k); err != nil {
		t.Fatalf("post-image.sh: %v\n%s", err, out)
	}
	buildertest.SameFiles(t, buildertest.Reference(t, k), filepath.Join(h.binaries, "nvboot"), "the hooks",
		outdir.TextPmemFile, outdir.StatePmemFile, outdir.DiskFile, outdir.KernelFile)
	// The target directory is Buildroot's: post-image.sh leaves it alone.
	if _, err := os.Stat(filepath.Join(h.target, contract.StoreImage[1:])); !os.IsNotExist(err) {
		t.Errorf("post-image.sh wrote the provisioning image into TARGET_DIR (%v)", err)
	}
}

// TestHooksBadInput: a program marked for OFF2F that is not a static
// executable, a kernel without an option of the fragments and a text store
// too small each stop the scripts with an error naming it.
func TestHooksBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds appliance images (-short)")
	}
	buildtest.NeedTools(t)
	progs := buildertest.Programs(t)
	t.Run("dynamic program", func(t *testing.T) {
		target := buildertest.Target(t, progs, false)
		dyn, err := exec.LookPath("true")
		if err != nil {
			t.Skip("no dynamic executable to try (true)")
		}
		b, _ := os.ReadFile(dyn)
		if err := os.WriteFile(filepath.Join(target, "bin", "dyn"), b, 0o755); err != nil {
			t.Fatal(err)
		}
		h := newHooks(t, target, "/sbin/nvinit /bin/dyn", 0)
		out, err := h.postBuild(t)
		if err == nil || !strings.Contains(out, "/bin/dyn") || !strings.Contains(out, "static") {
			t.Errorf("post-build.sh with a dynamic /bin/dyn: %v\n%s", err, out)
		}
	})
	t.Run("missing program", func(t *testing.T) {
		h := newHooks(t, buildertest.Target(t, progs, false), "/sbin/nvinit /bin/absent", 0)
		if out, err := h.postBuild(t); err == nil || !strings.Contains(out, "/bin/absent") {
			t.Errorf("post-build.sh with /bin/absent marked: %v\n%s", err, out)
		}
	})
	t.Run("kernel fragment option missing", func(t *testing.T) {
		h := newHooks(t, buildertest.Target(t, progs, false), "/sbin/nvinit /bin/kv", 0)
		if out, err := h.postBuild(t); err != nil {
			t.Fatalf("post-build.sh: %v\n%s", err, out)
		}
		kc := filepath.Join(h.build, "linux-6.1.174", ".config")
		b, _ := os.ReadFile(kc)
		b = bytes.ReplaceAll(b, []byte("CONFIG_FS_DAX=y\n"), nil)
		if err := os.WriteFile(kc, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := h.postImage(t, buildtest.FakeKernel(t))
		if err == nil || !strings.Contains(out, "CONFIG_FS_DAX") {
			t.Errorf("post-image.sh with a kernel without CONFIG_FS_DAX: %v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(h.binaries, "nvboot")); !os.IsNotExist(err) {
			t.Errorf("an image was written (%v)", err)
		}
	})
	t.Run("text store too small", func(t *testing.T) {
		h := newHooks(t, buildertest.Target(t, progs, false), "/sbin/nvinit /bin/kv", 4)
		if out, err := h.postBuild(t); err != nil {
			t.Fatalf("post-build.sh: %v\n%s", err, out)
		}
		out, err := h.postImage(t, buildtest.FakeKernel(t))
		if err == nil || !strings.Contains(out, "text store needs at least") || !strings.Contains(out, "BR2_PACKAGE_NVBOOT_TEXT_STORE_MIB=4") {
			t.Errorf("post-image.sh with a 4 MiB text store: %v\n%s", err, out)
		}
	})
}

// TestHookImageBoots boots what the board scripts write for a target with
// the programs Buildroot's defconfig marks (nvinit, poold and kv, poold's
// text in the store too) in QEMU: nvinit runs from the text store, kv
// answers a PUT and a GET through the network, and the guest powers off.
func TestHookImageBoots(t *testing.T) {
	buildtest.NeedTools(t)
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	h := newHooks(t, buildertest.Target(t, buildertest.Programs(t), true), "/sbin/nvinit /bin/poold /bin/kv", 0)
	if out, err := h.postBuild(t); err != nil {
		t.Fatalf("post-build.sh: %v\n%s", err, out)
	}
	if out, err := h.postImage(t, k); err != nil {
		t.Fatalf("post-image.sh: %v\n%s", err, out)
	}
	dir := filepath.Join(h.binaries, "nvboot")
	im, err := appliance.ReadImage(dir)
	if err != nil {
		t.Fatal(err)
	}
	pm := t.TempDir()
	if err := appliance.CopyPmem(dir, im, pm); err != nil {
		t.Fatal(err)
	}
	port, err := vm.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	in, stdin := io.Pipe()
	cfg, err := appliance.VMConfig(dir, im, appliance.BootOptions{PmemDir: pm, Stdin: in,
		Forwards: []vm.Forward{{Host: port, Guest: 8080}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	m, err := vm.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Kill()
	if _, err := m.ExpectString(ctx, "NVBOOT-MARK service-ready kv "); err != nil {
		t.Fatalf("kv not ready: %v\nconsole:\n%s", err, m.Console())
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/kv/built-by", port)
	req, _ := http.NewRequest("PUT", url, strings.NewReader("buildroot"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT: %v %v\nconsole:\n%s", resp, err, m.Console())
	}
	resp.Body.Close()
	resp, err = http.Get(url)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "buildroot" {
		t.Fatalf("GET: %d %q", resp.StatusCode, body)
	}
	go stdin.Write([]byte("poweroff\n"))
	select {
	case <-m.Done():
	case <-time.After(90 * time.Second):
		t.Fatalf("no power-off; console:\n%s", m.Console())
	}
	if !strings.Contains(m.Console(), "NVBOOT-MARK shutdown") {
		t.Fatalf("no shutdown mark; console:\n%s", m.Console())
	}
}
