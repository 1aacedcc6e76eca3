package appliance

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// writeTree creates files (a name ending in "/" is a directory) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshot is every path under dir with its contents ("" for directories).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			m[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		m[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// manifestJSON is an image.json as a build writes it.
func manifestJSON(t *testing.T, l Layout) string {
	t.Helper()
	im := Image{Layout: l, Hostname: "nvboot", Kernel: outdir.KernelFile, Disk: outdir.DiskFile, Pmem: []string{outdir.TextPmemFile, outdir.StatePmemFile},
		Cmdline: "root=/dev/vda2 quiet", Services: []ServiceInfo{{Name: "kv", Package: "github.com/nvboot/nvboot/examples/kv", Path: "/bin/kv"}},
		Partitions: []Partition{{Name: "esp", Offset: 1 << 20, Bytes: 8 << 20}}}
	if l == Initramfs {
		im.Initrd = outdir.InitrdFile
	}
	b, err := json.MarshalIndent(im, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The user's project directory, holding their image config named image.json
// (the name nvboot build -h uses), sources and other files, is never taken
// for an earlier build: the build refuses it, names it and what is in it,
// and every file is still there.
func TestBuildRefusesProjectDirectory(t *testing.T) {
	userConfig := `{"Packages": ["./svc"], "PackageConfig": {"./svc": {"ForwardPort": 8080}}}`
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"project with image.json", map[string]string{"image.json": userConfig, "go.mod": "module x\n", "svc/main.go": "package main\n", "notes.txt": "x"},
			[]string{`"go.mod"`, `"notes.txt"`, `"svc/"`}},
		{"only the user's image.json", map[string]string{"image.json": userConfig}, []string{"image.json", "not an nvboot image"}},
		{"user's image.json beside a stamp", map[string]string{"image.json": userConfig, outdir.StampFile: stampText}, []string{"image.json", "not one nvboot build wrote"}},
		{"earlier build plus a user file", map[string]string{outdir.ManifestFile: "", outdir.StampFile: stampText, outdir.DiskFile: "d", "keep.txt": "mine"},
			[]string{`"keep.txt"`}},
		{"a directory named like an output file", map[string]string{outdir.DiskFile + "/": ""}, []string{`"disk.img/"`}},
		{"unmarked output files", map[string]string{outdir.DiskFile: "d", outdir.KernelFile: "k"}, []string{"not an nvboot image"}},
		{"an nvboot image.json without the stamp", map[string]string{outdir.ManifestFile: manifestJSON(t, ELF), outdir.DiskFile: "d"},
			[]string{"image.json", "not an nvboot image"}},
		{"image.json with other file names beside the stamp", map[string]string{outdir.StampFile: stampText,
			outdir.ManifestFile: `{"Layout": "elf", "Kernel": "vmlinuz", "Disk": "disk.img", "Pmem": ["pmem-text.img", "pmem-state.img"]}`},
			[]string{"vmlinuz"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			out := filepath.Join(parent, "proj")
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
			writeTree(t, out, tt.files)
			before := snapshot(t, parent)
			_, err := Build(context.Background(), Options{Config: config.Demo(), Layout: OFF2F, Out: out, Kernel: "/nonexistent", ModuleRoot: moduleRoot(t)})
			if err == nil {
				t.Fatal("the build went ahead")
			}
			for _, w := range append([]string{out, "refusing"}, tt.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			after := snapshot(t, parent)
			if len(after) != len(before) {
				t.Errorf("files changed: before %v, after %v", before, after)
			}
			for p, b := range before {
				if after[p] != b {
					t.Errorf("%s changed or gone", p)
				}
			}
		})
	}
}

// A file where the output directory should be is refused, not replaced.
func TestBuildRefusesFileAsOutput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	os.WriteFile(out, []byte("mine"), 0o644)
	_, err := Build(context.Background(), Options{Config: config.Demo(), Layout: OFF2F, Out: out, Kernel: "/nonexistent", ModuleRoot: moduleRoot(t)})
	if err == nil || !strings.Contains(err.Error(), out) || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "mine" {
		t.Fatal("the file was replaced")
	}
}

// What a build may replace: nothing, an empty directory, a stamped build.
func TestCheckOutAcceptsBuilds(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string // nil: no directory
	}{
		{"nothing", nil},
		{"empty", map[string]string{}},
		{"stamped build", map[string]string{outdir.StampFile: stampText, outdir.ManifestFile: manifestJSON(t, OFF2F), outdir.DiskFile: "d", outdir.KernelFile: "k",
			outdir.TextPmemFile: "t", outdir.StatePmemFile: "s"}},
		{"stamped build with a later image.json field", map[string]string{outdir.StampFile: stampText,
			outdir.ManifestFile: `{"Layout": "off2f", "Kernel": "bzImage", "Disk": "disk.img", "Pmem": ["pmem-text.img", "pmem-state.img"], "Later": 1}`}},
		{"stamp only", map[string]string{outdir.StampFile: stampText}},
		{"stamped build run through UEFI", map[string]string{outdir.StampFile: stampText, outdir.ManifestFile: manifestJSON(t, OFF2F), outdir.DiskFile: "d",
			outdir.UEFIVarsFile: "v"}},
		{"stamped initramfs build", map[string]string{outdir.StampFile: stampText, outdir.ManifestFile: manifestJSON(t, Initramfs), outdir.InitrdFile: "i", outdir.DiskFile: "d"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			if tt.files != nil {
				os.Mkdir(out, 0o755)
				writeTree(t, out, tt.files)
			}
			if err := CheckOut(out); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A mount point as the output directory is refused before the build, naming
// it and why (the build's final rename of it would fail): a filesystem
// mounted there, and a bind mount of a directory of the same filesystem,
// which has its parent's st_dev.
func TestCheckOutRefusesMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount)")
	}
	for _, tt := range []struct {
		name, want string
		mount      func(out string) error
	}{
		{"tmpfs", "a tmpfs mount", func(out string) error { return syscall.Mount("tmpfs", out, "tmpfs", 0, "size=1m") }},
		{"bind mount", "mount point", func(out string) error {
			src := filepath.Join(filepath.Dir(out), "src")
			os.Mkdir(src, 0o755)
			return syscall.Mount(src, out, "", syscall.MS_BIND, "")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out dir")
			os.Mkdir(out, 0o755)
			if err := tt.mount(out); err != nil {
				t.Skipf("cannot mount here: %v", err)
			}
			t.Cleanup(func() { syscall.Unmount(out, syscall.MNT_DETACH) })
			err := CheckOut(out)
			if err == nil || !strings.Contains(err.Error(), out) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "-o "+filepath.Join(out, "image")) {
				t.Fatalf("CheckOut of a mount point: %v; want it named, %q, and a directory inside it to build into", err, tt.want)
			}
		})
	}
}

// mountedOn reads mountinfo's escaped mount points and the type after "-".
func TestMountedOn(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(p, []byte("22 1 0:21 / / rw - ext4 /dev/vda rw\n"+
		"36 22 0:30 / /mnt/my\\040card rw,relatime - vfat /dev/sdb1 rw\n"), 0o644)
	if fstype, ok := mountedOn(p, "/mnt/my card"); !ok || fstype != "vfat" {
		t.Errorf("/mnt/my card: %q %v, want vfat", fstype, ok)
	}
	if _, ok := mountedOn(p, "/mnt"); ok {
		t.Error("/mnt is no mount point")
	}
}

// Relative paths name what they name from the current directory, though go
// build and make run elsewhere: -o, the checkout, the kernel and a config's
// local package ("./examples/kv" beside the config). A failed build with
// relative paths leaves nothing behind, in the output's parent or the
// checkout.
func TestBuildRelativePaths(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs and filesystems")
	}
	buildtest.NeedTools(t)
	root := moduleRoot(t)
	k := buildtest.FakeKernel(t)
	cwd := t.TempDir()
	t.Chdir(cwd)
	relRoot, err := filepath.Rel(cwd, root)
	if err != nil {
		t.Fatal(err)
	}
	relKernel, err := filepath.Rel(cwd, k)
	if err != nil {
		t.Fatal(err)
	}
	leftovers := func(dir string) []string {
		var l []string
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.Contains(e.Name(), ".build-") {
				l = append(l, e.Name())
			}
		}
		return l
	}
	cfg := &config.Config{Packages: []string{"./examples/kv"},
		PackageConfig: map[string]config.PackageConfig{"./examples/kv": {WaitFor: config.WaitFor{"tcp:8080"}, ForwardPort: 8080}}}
	im, err := Build(context.Background(), Options{Config: cfg, Layout: ELF, Out: "out/loc", Kernel: relKernel, ModuleRoot: relRoot, ConfigDir: relRoot})
	if err != nil {
		t.Fatalf("build with relative paths: %v", err)
	}
	if len(im.Services) != 1 || im.Services[0].Name != "kv" {
		t.Fatalf("services %+v", im.Services)
	}
	if _, err := ReadImage(filepath.Join(cwd, "out", "loc")); err != nil {
		t.Fatal(err)
	}
	bad := &config.Config{Packages: []string{"./examples/kv", "./no-such-service"}}
	if _, err := Build(context.Background(), Options{Config: bad, Layout: ELF, Out: "out/bad", Kernel: relKernel, ModuleRoot: relRoot, ConfigDir: relRoot}); err == nil || !strings.Contains(err.Error(), "no-such-service") {
		t.Fatalf("bad build: %v", err)
	}
	for _, dir := range []string{cwd, filepath.Join(cwd, "out"), root} {
		if l := leftovers(dir); len(l) > 0 {
			t.Errorf("left behind in %s: %v", dir, l)
		}
	}
	if _, err := os.Stat(filepath.Join(cwd, "out", "bad")); !os.IsNotExist(err) {
		t.Errorf("failed build's output: %v", err)
	}
}
