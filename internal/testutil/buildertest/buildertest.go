package buildertest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/internal/checkout"
)

// Root is the nvboot checkout (internal/checkout: $NVBOOT_SRC, else the
// module the test runs in).
func Root(t testing.TB) string {
	t.Helper()
	root, err := checkout.Root(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// Programs builds nvinit, kv and poold the way nvboot build does for the
// off2f layout (static, no build id, paths trimmed, segments on 2 MiB
// boundaries: the same bytes as in its image) and the
// loader, into a directory it returns: nvinit, kv, poold, ld-off2f.
func Programs(t testing.TB) string {
	t.Helper()
	root, dir := Root(t), t.TempDir()
	for name, pkg := range map[string]string{"nvinit": "./cmd/nvinit", "kv": "./examples/kv", "poold": "./cmd/poold"} {
		Run(t, root, []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOWORK=off"},
			"go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid= -R=0x200000", "-o", filepath.Join(dir, name), pkg)
	}
	Run(t, filepath.Join(root, "loader"), nil, "make", "-s", "OUT="+filepath.Join(dir, "ld-off2f"))
	return dir
}

// HostTools builds the host tools the hooks run (off2f, nvboot) into
// DIR/bin and returns DIR: a stand-in for Buildroot's HOST_DIR or Yocto's
// native sysroot.
func HostTools(t testing.TB) string {
	t.Helper()
	root, dir := Root(t), t.TempDir()
	for _, c := range []string{"off2f", "nvboot"} {
		Run(t, root, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", filepath.Join(dir, "bin", c), "./cmd/"+c)
	}
	return dir
}

// Target makes a target directory holding the programs where the
// builders' packages install them: /sbin/nvinit, /bin/kv, /bin/poold and
// the loader /lib/ld-off2f.so.1; with poold false, without poold (as
// nvboot build's image of rootfs/appliance has none). It also holds the
// build host's appliance.HostFiles (the CA bundle, /etc/services), as the
// builders' ca-certificates and netbase packages (or skeleton) install
// them and nvboot build copies them.
func Target(t testing.TB, progs string, poold bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "target")
	type file struct {
		dst  string
		mode os.FileMode
	}
	files := map[string]file{filepath.Join(progs, "nvinit"): {"sbin/nvinit", 0o755}, filepath.Join(progs, "kv"): {"bin/kv", 0o755},
		filepath.Join(progs, "ld-off2f"): {"lib/ld-off2f.so.1", 0o755}}
	if poold {
		files[filepath.Join(progs, "poold")] = file{"bin/poold", 0o755}
	}
	for _, f := range appliance.HostFiles {
		if _, err := os.Stat(f.Host); err == nil {
			files[f.Host] = file{f.Image, 0o644}
		}
	}
	for src, f := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, f.dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// KernelConfig is a kernel .config for the hooks' fragment check: the
// config beside $NVBOOT_KERNEL (kernel-config/build.sh keeps it there, as
// "config"), else
// one made of the fragments' own lines, which passes the check.
func KernelConfig(t testing.TB) string {
	t.Helper()
	if k := os.Getenv("NVBOOT_KERNEL"); k != "" {
		for _, name := range []string{"config", ".config"} {
			if c := filepath.Join(filepath.Dir(k), name); fileExists(c) {
				return c
			}
		}
	}
	var b bytes.Buffer
	for _, f := range []string{"common.config", "x86_64.config"} {
		raw, err := os.ReadFile(filepath.Join(Root(t), "kernel-config", f))
		if err != nil {
			t.Fatal(err)
		}
		b.Write(raw)
	}
	p := filepath.Join(t.TempDir(), ".config")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Run runs a command in dir with env added, failing the test with its
// output when it fails; it returns stdout.
func Run(t testing.TB, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := Output(dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// Output runs a command and returns its stdout and stderr together.
func Output(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// Reference is nvboot build's image of the shared appliance
// (rootfs/appliance/appliance.json) with kernel: what the builders' images
// are compared with.
func Reference(t testing.TB, kernel string) string {
	t.Helper()
	cfg, err := config.Load(filepath.Join(Root(t), "rootfs", "appliance", "appliance.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The builders' kernel is a bzImage alone (Buildroot's and Yocto's
	// kernel packages make no PVH vmlinux beside it), so their images have
	// no kernel region; nvboot build gets the same kernel the same way.
	alone := filepath.Join(t.TempDir(), "bzImage")
	b, err := os.ReadFile(kernel)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(t.TempDir(), "ref")
	if _, err := appliance.Build(context.Background(), appliance.Options{Config: cfg, Layout: appliance.OFF2F, Out: ref,
		Kernel: alone, ModuleRoot: Root(t)}); err != nil {
		t.Fatal(err)
	}
	return ref
}

// SameFiles fails the test for each of files that differs between the
// directories ref (nvboot build's) and got (who's).
func SameFiles(t testing.TB, ref, got, who string, files ...string) {
	t.Helper()
	for _, f := range files {
		a, err := os.ReadFile(filepath.Join(ref, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(got, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: %s's (%d bytes) differs from nvboot build's (%d bytes)", f, who, len(b), len(a))
		}
	}
}
