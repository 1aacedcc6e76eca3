// Package yocto holds the checks of meta-nvboot against the vendored
// OpenEmbedded-Core and BitBake (Yocto 6.0.2): lint, parse, and the image
// class's conversion step run on real inputs. yocto/README.md describes
// the layer and its tests.
package yocto

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/internal/testutil/buildertest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
	"github.com/nvboot/nvboot/internal/testutil/vendortree"
)

// OelintVersion is the oelint-adv the layer is held to (ci/deps.sh installs
// it into ~/.cache/nvboot/oelint-adv-VERSION).
const OelintVersion = "9.11.2"

// oelintSuppressed are the rules the check leaves out, each for a reason:
// homepageping fetches HOMEPAGE (CI has no network); bbclassextend asks
// for native variants of programs only the appliance runs (kv, the loader).
var oelintSuppressed = []string{"oelint.vars.homepageping", "oelint.var.bbclassextend"}

func layer(t testing.TB) string { return filepath.Join(buildertest.Root(t), "yocto", "meta-nvboot") }

// TestKernelFragmentMatches: the layer's kernel fragment is kernel-config/'s
// fragments, not a copy that drifts. NVBOOT_UPDATE=1 regenerates it.
func TestKernelFragmentMatches(t *testing.T) {
	root := buildertest.Root(t)
	var want bytes.Buffer
	want.WriteString("# Generated from the nvboot checkout's kernel-config/common.config and\n" +
		"# kernel-config/x86_64.config (TestKernelFragmentMatches holds it to them;\n" +
		"# NVBOOT_UPDATE=1 go test ./yocto regenerates it). Do not edit.\n\n")
	for i, f := range []string{"common.config", "x86_64.config"} {
		b, err := os.ReadFile(filepath.Join(root, "kernel-config", f))
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			want.WriteString("\n")
		}
		want.Write(b)
	}
	p := filepath.Join(layer(t), "recipes-kernel", "linux", "linux-yocto", "nvboot.cfg")
	if os.Getenv("NVBOOT_UPDATE") == "1" {
		if err := os.WriteFile(p, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("%s differs from kernel-config/common.config + x86_64.config (NVBOOT_UPDATE=1 go test -run TestKernelFragmentMatches ./yocto regenerates it)", p)
	}
}

// TestOelint: oelint-adv, the pinned version, finds nothing in any recipe,
// append, class, include or config of the layer.
func TestOelint(t *testing.T) {
	bin := os.Getenv("NVBOOT_OELINT")
	if bin == "" {
		if c, err := vendortree.CacheRoot(); err == nil {
			bin = filepath.Join(filepath.Dir(c), "oelint-adv-"+OelintVersion, "bin", "oelint-adv")
		}
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("oelint-adv %s not installed at %s (ci/deps.sh installs it; or set NVBOOT_OELINT)", OelintVersion, bin)
	}
	if v := strings.TrimSpace(buildertest.Run(t, "", nil, bin, "--version")); v != "oelint-adv "+OelintVersion {
		t.Fatalf("%s is %q, want oelint-adv %s", bin, v, OelintVersion)
	}
	var files []string
	err := filepath.WalkDir(layer(t), func(p string, d os.DirEntry, err error) error {
		switch filepath.Ext(p) {
		case ".bb", ".bbappend", ".bbclass", ".inc", ".conf":
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--quiet", "--release", "wrynose", "--jobs", "1"}
	for _, r := range oelintSuppressed {
		args = append(args, "--suppress", r)
	}
	out, err := buildertest.Output(layer(t), nil, bin, append(args, files...)...)
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("oelint-adv: %v\n%s", err, out)
	}
}

// bb is a BitBake build directory with oe-core and meta-nvboot, run as an
// unprivileged user.
type bb struct {
	base, build, layer string
	user               *user.User // nil: the current user, who is not root
	path               string
}

var (
	bbOnce sync.Once
	bbDir  *bb
	bbErr  error
	bbSkip string
)

// bitbakeUser is the user BitBake runs as when the tests run as root.
const bitbakeUser = "nvboot-bitbake"

// setup makes (once per test binary) the build directory: the vendored
// oe-core and BitBake unpacked, a copy of the layer with the rootfs/ and
// kernel-config/ it reads, conf/ with BB_NO_NETWORK = "1". As root, all of
// it lives under /var/tmp/nvboot-yocto, owned by the user nvboot-bitbake
// (made when missing), since BitBake refuses to run as root.
func setup(t *testing.T) *bb {
	t.Helper()
	if testing.Short() {
		t.Skip("runs BitBake, whose first parse takes minutes (-short)")
	}
	bbOnce.Do(func() { bbDir, bbSkip, bbErr = newBB(t) })
	if bbSkip != "" {
		t.Skip(bbSkip)
	}
	if bbErr != nil {
		t.Fatal(bbErr)
	}
	return bbDir
}

func newBB(t *testing.T) (*bb, string, error) {
	if out, _ := exec.Command("locale", "-a").Output(); !regexp.MustCompile(`(?mi)^en_US\.utf-?8$`).Match(out) {
		return nil, "BitBake needs the en_US.UTF-8 locale (ci/deps.sh generates it)", nil
	}
	for _, tool := range []string{"python3", "gawk", "chrpath", "diffstat", "tar", "xz"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, tool + " not installed: BitBake's sanity check needs it (ci/deps.sh)", nil
		}
	}
	b := &bb{}
	var err error
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("runuser"); err != nil {
			return nil, "running as root and no runuser to run BitBake as another user", nil
		}
		if b.user, err = user.Lookup(bitbakeUser); err != nil {
			if out, err := exec.Command("useradd", "--system", "--create-home", "--shell", "/bin/sh", bitbakeUser).CombinedOutput(); err != nil {
				return nil, "", fmt.Errorf("making the user %s for BitBake: %v\n%s", bitbakeUser, err, out)
			}
			if b.user, err = user.Lookup(bitbakeUser); err != nil {
				return nil, "", err
			}
		}
		b.base = "/var/tmp/nvboot-yocto"
	} else {
		c, err := vendortree.CacheRoot()
		if err != nil {
			return nil, "", err
		}
		b.base = filepath.Join(filepath.Dir(c), "yocto")
	}
	trees := filepath.Join(b.base, "vendor")
	var oe, bitbake string
	if oe, err = vendortree.Unpack(vendortree.Dir(), "openembedded-core-yocto-6.0.2", trees); err == nil {
		bitbake, err = vendortree.Unpack(vendortree.Dir(), "bitbake-yocto-6.0.2", trees)
	}
	if os.IsNotExist(err) {
		return nil, fmt.Sprintf("vendored oe-core or BitBake missing: %v (../shared/vendor, or NVBOOT_VENDOR)", err), nil
	}
	if err != nil {
		return nil, "", err
	}
	// The layer with what its class reads beside it, copied with its times
	// (BitBake's parse cache stays valid from one run to the next).
	src := filepath.Join(b.base, "src")
	if err := os.RemoveAll(src); err != nil {
		return nil, "", err
	}
	for _, d := range []string{"yocto", "rootfs", "kernel-config"} {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(d)), 0o755); err != nil {
			return nil, "", err
		}
		if out, err := exec.Command("cp", "-a", "--no-preserve=ownership", filepath.Join(buildertest.Root(t), d), filepath.Join(src, d)).CombinedOutput(); err != nil {
			return nil, "", fmt.Errorf("copying %s: %v\n%s", d, err, out)
		}
	}
	b.layer = filepath.Join(src, "yocto", "meta-nvboot")
	b.build = filepath.Join(b.base, "build")
	if err := os.MkdirAll(filepath.Join(b.build, "conf"), 0o755); err != nil {
		return nil, "", err
	}
	files := map[string]string{
		"local.conf": "MACHINE = \"qemux86-64\"\nDISTRO = \"nvboot-appliance\"\nBB_NO_NETWORK = \"1\"\nCONNECTIVITY_CHECK_URIS = \"\"\n",
		"bblayers.conf": fmt.Sprintf("BBPATH = \"${TOPDIR}\"\nBBFILES ?= \"\"\nBBLAYERS = \"%s %s\"\n",
			filepath.Join(oe, "meta"), b.layer),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(b.build, "conf", name), []byte(text), 0o644); err != nil {
			return nil, "", err
		}
	}
	b.path = filepath.Join(bitbake, "bin") + ":" + filepath.Join(oe, "scripts") + ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
	if b.user != nil {
		if out, err := exec.Command("chown", "-R", b.user.Uid+":"+b.user.Gid, b.base).CombinedOutput(); err != nil {
			return nil, "", fmt.Errorf("chown %s: %v\n%s", b.base, err, out)
		}
	}
	return b, "", nil
}

// run runs a BitBake command in the build directory as the unprivileged
// user, with a clean environment.
func (b *bb) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	script := "cd " + b.build + " && exec " + strings.Join(args, " ")
	env := []string{"env", "-i", "LANG=en_US.UTF-8", "PATH=" + b.path}
	var cmd *exec.Cmd
	if b.user != nil {
		cmd = exec.Command("runuser", append([]string{"-u", b.user.Username, "--"}, append(append(env, "HOME="+b.user.HomeDir), "sh", "-c", script)...)...)
	} else {
		cmd = exec.Command(env[0], append(append(env[1:], "HOME="+os.Getenv("HOME")), "sh", "-c", script)...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

// TestBitbakeLayers: bitbake-layers show-layers lists meta-nvboot.
func TestBitbakeLayers(t *testing.T) {
	b := setup(t)
	out, err := b.run(t, "bitbake-layers", "show-layers")
	if err != nil {
		t.Fatalf("bitbake-layers show-layers: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^nvboot\s+` + regexp.QuoteMeta(b.layer) + `\s+6$`).MatchString(out) {
		t.Errorf("show-layers does not list meta-nvboot at %s:\n%s", b.layer, out)
	}
}

// TestBitbakeParses: bitbake -e of each recipe of the layer, of the image
// and of the kernel with DISTRO = "nvboot-appliance", offline, with what each must
// have taken from the layer.
func TestBitbakeParses(t *testing.T) {
	b := setup(t)
	want := map[string][]string{
		"nvboot":        {`^GO_INSTALL=".*/cmd/nvinit .*/cmd/poold`, `^SRC_URI=".*gomod://golang.org/x/sys;version=v0.49.0`, `^export CGO_ENABLED="0"`},
		"nvboot-native": {`^GO_INSTALL=".*/cmd/nvboot .*/cmd/off2f"`},
		"nvboot-kv":     {`^GO_INSTALL="github.com/nvboot/nvboot/examples/kv"`},
		"ld-off2f":      {`^S=".*/loader"`},
		"nvboot-image":  {`^ROOTFS_POSTPROCESS_COMMAND=".*nvboot_rootfs_off2f`, `^IMAGE_INSTALL=".*\bca-certificates netbase\b`, `^IMAGE_FSTYPES=".*\bnvboot\b`, `^WKS_FILE="nvboot.wks"`},
		"linux-yocto":   {`^SRC_URI=".*file://nvboot.cfg file://nvboot-cmdline.cfg`, `^KMETA_AUDIT_WERROR="1"`},
	}
	for _, r := range []string{"nvboot", "nvboot-native", "nvboot-kv", "ld-off2f", "nvboot-image", "linux-yocto"} {
		t.Run(r, func(t *testing.T) {
			out, err := b.run(t, "bitbake", "-e", r)
			if err != nil {
				t.Fatalf("bitbake -e %s: %v\n%s", r, err, tail(out, 40))
			}
			for _, re := range want[r] {
				if !regexp.MustCompile("(?m)" + re).MatchString(out) {
					t.Errorf("bitbake -e %s: no line matching %s", r, re)
				}
			}
		})
	}
}

// TestClassConversion runs the image class's rootfs step, as BitBake
// expands it for nvboot-image, on a rootfs holding the real nvinit, kv and
// loader: the programs become OFF2F, the provisioning images land in the
// rootfs, and the pmem images are byte-identical to nvboot build's of the
// same appliance.
func TestClassConversion(t *testing.T) {
	buildtest.NeedTools(t)
	b := setup(t)
	env, err := b.run(t, "bitbake", "-e", "nvboot-image")
	if err != nil {
		t.Fatalf("bitbake -e nvboot-image: %v\n%s", err, tail(env, 40))
	}
	fn := regexp.MustCompile(`(?ms)^nvboot_rootfs_off2f\(\) \{\n(.*?)^\}`).FindStringSubmatch(env)
	if fn == nil {
		t.Fatal("bitbake -e nvboot-image shows no nvboot_rootfs_off2f function")
	}
	value := func(name string) string {
		m := regexp.MustCompile(`(?m)^(?:export )?` + name + `="(.*)"$`).FindStringSubmatch(env)
		if m == nil {
			t.Fatalf("bitbake -e nvboot-image: no %s", name)
		}
		return m[1]
	}
	rootfs := buildertest.Target(t, buildertest.Programs(t), false)
	out := filepath.Join(t.TempDir(), "pmem")
	body := strings.NewReplacer(value("IMAGE_ROOTFS"), rootfs, value("NVBOOT_PMEM_DIR"), out).Replace(fn[1])
	if !strings.Contains(body, filepath.Join(b.base, "src", "rootfs", "install.sh")) {
		t.Fatalf("the class does not take rootfs/ from beside the layer:\n%s", body)
	}
	host := buildertest.HostTools(t)
	res, err := buildertest.Output(rootfs, []string{"PATH=" + filepath.Join(host, "bin") + ":" + os.Getenv("PATH")}, "bash", "-euc", body)
	if err != nil {
		t.Fatalf("nvboot_rootfs_off2f: %v\n%s\n%s", err, body, res)
	}
	for _, p := range []string{contract.StoreImage, contract.StateImage, contract.Manifest} {
		if _, err := os.Stat(filepath.Join(rootfs, p[1:])); err != nil {
			t.Errorf("rootfs: %v", err)
		}
	}
	for _, p := range []string{"sbin/nvinit", "bin/kv"} {
		if res, err := buildertest.Output("", nil, filepath.Join(host, "bin", "off2f"), "inspect", filepath.Join(rootfs, p)); err != nil {
			t.Errorf("%s is not an OFF2F program: %v\n%s", p, err, res)
		}
	}
	buildertest.SameFiles(t, buildertest.Reference(t, buildtest.FakeKernel(t)), out, "the class",
		outdir.TextPmemFile, outdir.StatePmemFile)
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// KasVersion is the kas whose schema the project file is held to (ci/deps.sh
// installs it into ~/.cache/nvboot/kas-VERSION).
const KasVersion = "5.5"

// TestKasFile: yocto/kas/nvboot.yml is valid for kas's schema, and it
// fetches OE-Core and BitBake at the commits of the vendored trees the
// other tests check the layer against.
func TestKasFile(t *testing.T) {
	c, err := vendortree.CacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(filepath.Dir(c), "kas-"+KasVersion, "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Skipf("kas %s not installed at %s (ci/deps.sh installs it)", KasVersion, filepath.Dir(py))
	}
	file := filepath.Join(buildertest.Root(t), "yocto", "kas", "nvboot.yml")
	const check = `import json, os, sys, yaml, jsonschema, kas
schema = json.load(open(os.path.join(os.path.dirname(kas.__file__), "schema-kas.json")))
jsonschema.validate(yaml.safe_load(open(sys.argv[1])), schema)`
	if out, err := buildertest.Output("", nil, py, "-c", check, file); err != nil {
		t.Errorf("%s is not a valid kas file: %v\n%s", file, err, out)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(vendortree.Dir(), "README.md"))
	if err != nil {
		t.Skipf("vendored trees' README: %v", err)
	}
	commits := regexp.MustCompile(`(?m)^\s*commit: ([0-9a-f]{40})$`).FindAllSubmatch(raw, -1)
	if len(commits) != 2 {
		t.Fatalf("%s: %d pinned commits, want OE-Core's and BitBake's", file, len(commits))
	}
	for _, m := range commits {
		if !bytes.Contains(readme, m[1]) {
			t.Errorf("%s pins %s, which is not a commit of the vendored trees CI checks against", file, m[1])
		}
	}
}
