package appliance

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/fsdax"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
	"github.com/nvboot/nvboot/off2f"
)

func moduleRoot(t *testing.T) string {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func buildLayout(t *testing.T, cfg *config.Config, l Layout, out, kernel string) *Image {
	t.Helper()
	im, err := Build(context.Background(), Options{Config: cfg, Layout: l, Out: out, Kernel: kernel, ModuleRoot: moduleRoot(t)})
	if err != nil {
		t.Fatalf("building %s: %v", l, err)
	}
	return im
}

func TestBuildIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs and filesystems")
	}
	buildtest.NeedTools(t)
	k := buildtest.FakeKernel(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	buildLayout(t, config.Demo(), OFF2F, a, k)
	buildLayout(t, config.Demo(), OFF2F, b, k)
	ents, err := os.ReadDir(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) < 5 {
		t.Fatalf("output has %d files, want kernel, disk, 2 pmem images, image.json", len(ents))
	}
	for _, e := range ents {
		x, err1 := os.ReadFile(filepath.Join(a, e.Name()))
		y, err2 := os.ReadFile(filepath.Join(b, e.Name()))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds of the same inputs", e.Name())
		}
	}
}

// extractRoot unpacks the root partition of a built disk with fsck.erofs,
// which checks the filesystem on the way.
func extractRoot(t *testing.T, dir string, im *Image) string {
	t.Helper()
	buildtest.NeedTools(t, "sgdisk", "fsck.erofs")
	out, err := exec.Command("sgdisk", "-v", filepath.Join(dir, im.Disk)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "No problems found") {
		t.Fatalf("sgdisk -v: %v\n%s", err, out)
	}
	var root *Partition
	for i, p := range im.Partitions {
		if p.Name == "root" {
			root = &im.Partitions[i]
		}
	}
	if root == nil {
		t.Fatalf("no root partition in %v", im.Partitions)
	}
	disk, err := os.ReadFile(filepath.Join(dir, im.Disk))
	if err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(t.TempDir(), "root.erofs")
	if err := os.WriteFile(part, disk[root.Offset:root.Offset+root.Bytes], 0o644); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("fsck.erofs", "--extract="+tree, part).CombinedOutput(); err != nil {
		t.Fatalf("fsck.erofs: %v\n%s", err, out)
	}
	return tree
}

func readInitConfig(t *testing.T, root string) *contract.InitConfig {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, contract.InitConfigPath[1:]))
	if err != nil {
		t.Fatal(err)
	}
	c, err := contract.ParseInitConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkStore runs e2fsck over the filesystem in a pmem image and returns its
// file list (debugfs ls).
func checkStore(t *testing.T, pmemImg string) string {
	t.Helper()
	fs := pmemImg + "?offset=2097152"
	if out, err := exec.Command("e2fsck", "-fn", fs).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn %s: %v\n%s", fs, err, out)
	}
	out, err := exec.Command("debugfs", "-R", "ls -p /", fs).CombinedOutput()
	if err != nil {
		t.Fatalf("debugfs: %v\n%s", err, out)
	}
	return string(out)
}

// checkStateTemplate asserts the gzip template on the root filesystem is the
// state filesystem of the pmem image, byte for byte, its header without a
// name or a time.
func checkStateTemplate(t *testing.T, template, pmemImg string) {
	t.Helper()
	f, err := os.Open(template)
	if err != nil {
		t.Fatalf("state template: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("state template: %v", err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("state template header: name %q, time %v: want neither", zr.Name, zr.ModTime)
	}
	fs, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("state template: %v", err)
	}
	pm, err := os.ReadFile(pmemImg)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) < 4096 || len(pm) < fsdax.Align+len(fs) || !bytes.Equal(pm[fsdax.Align:fsdax.Align+len(fs)], fs) {
		t.Errorf("state template (%d bytes) is not the filesystem in %s", len(fs), pmemImg)
	}
}

func TestLayouts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs and filesystems")
	}
	buildtest.NeedTools(t)
	k := buildtest.FakeKernel(t)
	for _, l := range Layouts {
		t.Run(string(l), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			im := buildLayout(t, config.Demo(), l, dir, k)
			if im.Layout != l || len(im.Services) != 1 || im.Services[0].Name != "kv" || im.Services[0].ForwardPort != 8080 ||
				strings.Join(im.Services[0].Args, " ") != "-listen :8080 -heap /nv/state/kv.heap" {
				t.Fatalf("image.json: %+v", im)
			}
			read, err := ReadImage(dir)
			if err != nil || read.Cmdline != im.Cmdline {
				t.Fatalf("ReadImage: %v %+v", err, read)
			}
			// kv's text is recorded, and is part of the image's (nvinit's is the rest).
			if kv := read.Services[0].TextBytes; kv < 1<<20 || kv >= read.TextBytes {
				t.Errorf("image.json: kv's TextBytes %d, the image's %d", kv, read.TextBytes)
			}
			store := checkStore(t, filepath.Join(dir, outdir.TextPmemFile))
			checkStore(t, filepath.Join(dir, outdir.StatePmemFile))
			checkESP(t, dir, im, k)
			var root string
			if l == Initramfs {
				if im.Initrd == "" || !strings.Contains(im.Cmdline, "rdinit="+contract.Init) {
					t.Fatalf("initramfs layout: initrd %q cmdline %q", im.Initrd, im.Cmdline)
				}
				root = t.TempDir()
				cpio := exec.Command("cpio", "-id", "--quiet")
				cpio.Dir = root
				f, err := os.Open(filepath.Join(dir, im.Initrd))
				if err != nil {
					t.Fatal(err)
				}
				cpio.Stdin = f
				if out, err := cpio.CombinedOutput(); err != nil {
					t.Fatalf("cpio: %v\n%s", err, out)
				}
				f.Close()
			} else {
				root = extractRoot(t, dir, im)
			}
			cfg := readInitConfig(t, root)
			if len(cfg.Services) != 1 || cfg.Services[0].Path != im.Services[0].Path || cfg.Services[0].WaitFor != "tcp:8080" {
				t.Fatalf("nvinit config services: %+v", cfg.Services)
			}
			if cfg.State.Device != contract.StateDevice || cfg.State.Image != contract.StateImage {
				t.Errorf("state config %+v", cfg.State)
			}
			checkStateTemplate(t, filepath.Join(root, contract.StateImage[1:]), filepath.Join(dir, outdir.StatePmemFile))
			initHdr, err := os.ReadFile(filepath.Join(root, contract.Init[1:]))
			if err != nil {
				t.Fatal(err)
			}
			_, hdrErr := off2f.ParseHeader(initHdr)
			switch l {
			case OFF2F:
				if hdrErr != nil {
					t.Fatalf("/sbin/nvinit is not an OFF2F header: %v", hdrErr)
				}
				if cfg.TextStore.Device != contract.TextDevice || cfg.TextStore.Image != contract.StoreImage {
					t.Errorf("text store config %+v", cfg.TextStore)
				}
				want, err := off2f.ReadManifest(filepath.Join(root, contract.Manifest[1:]))
				if err != nil || len(want) != 2 {
					t.Fatalf("manifest: %v %v", want, err)
				}
				for h := range want {
					if !strings.Contains(store, h) {
						t.Errorf("text %s of the manifest is not in the store:\n%s", h, store)
					}
					if _, err := os.Stat(filepath.Join(root, contract.FallbackDir[1:], h)); err != nil {
						t.Errorf("no fallback copy of %s: %v", h, err)
					}
				}
				if _, err := os.Stat(filepath.Join(root, contract.Loader[1:])); err != nil {
					t.Error(err)
				}
				// Linked -R 0x200000 (off2fLink): converted with 2 MiB spans.
				for _, p := range []string{contract.Init, cfg.Services[0].Path} {
					h, err := off2f.ParseHeader(mustReadFile(t, filepath.Join(root, p[1:])))
					if err != nil || h.Note.Flags&off2f.FlagHugeSpan == 0 {
						t.Errorf("%s: want an OFF2F program with 2 MiB spans: %v %+v", p, err, h)
					}
				}
			case DAXELF:
				if hdrErr == nil {
					t.Error("dax-elf: nvinit should be a plain ELF")
				}
				if cfg.Services[0].Path != contract.DAXBinDir+"/kv" || !strings.Contains(store, "bin") {
					t.Errorf("dax-elf: kv at %q; store:\n%s", cfg.Services[0].Path, store)
				}
			default:
				if hdrErr == nil {
					t.Errorf("%s: nvinit should be a plain ELF", l)
				}
				// Linked as Go links by default: the -R of off2f's alone.
				f, err := elf.Open(filepath.Join(root, contract.Init[1:]))
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range f.Progs {
					if p.Type == elf.PT_LOAD && p.Align != 0x1000 {
						t.Errorf("%s: nvinit's PT_LOAD at %#x aligned %#x, not as Go links by default", l, p.Vaddr, p.Align)
					}
				}
				f.Close()
				if cfg.TextStore.Device != "" {
					t.Errorf("%s: a text store is configured: %+v", l, cfg.TextStore)
				}
			}
		})
	}
}

// Bad input names the input and the reason, and leaves no output directory
// and no temporary directory behind.
func TestBuildBadInput(t *testing.T) {
	buildtest.NeedTools(t)
	k := buildtest.FakeKernel(t)
	demo := func(f func(c *config.Config)) *config.Config {
		c := config.Demo()
		f(c)
		return c
	}
	tests := []struct {
		name   string
		cfg    *config.Config
		layout Layout
		kernel string
		want   string
	}{
		{"invalid config", demo(func(c *config.Config) { c.Hostname = "-bad" }), OFF2F, k, "Hostname"},
		{"missing service source", demo(func(c *config.Config) { c.Packages = append(c.Packages, "./no-such-service") }), OFF2F, k, "no-such-service"},
		{"library package", demo(func(c *config.Config) { c.Packages = append(c.Packages, "github.com/nvboot/nvboot/internal/filemode") }), OFF2F, k, "is package filemode, not package main"},
		{"service that does not build", demo(func(c *config.Config) { c.Packages = append(c.Packages, "github.com/nvboot/nvboot/no/such/pkg") }), OFF2F, k, "no/such/pkg"},
		{"text store too small", demo(func(c *config.Config) { c.TextStoreMiB = 4 }), OFF2F, k, "TextStoreMiB 4"},
		{"unknown layout", config.Demo(), Layout("zip"), k, `layout "zip"`},
		{"missing kernel", config.Demo(), OFF2F, "/nonexistent/bzImage", "/nonexistent/bzImage"},
		{"kernel that is not a bzImage", config.Demo(), OFF2F, "appliance.go", "not an x86 bzImage"},
		{"kernel that is a directory", config.Demo(), OFF2F, "testdata", "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if testing.Short() && tt.name != "invalid config" && tt.name != "unknown layout" && !strings.HasPrefix(tt.name, "kernel") {
				t.Skip("builds Go programs")
			}
			parent := t.TempDir()
			out := filepath.Join(parent, "out")
			_, err := Build(context.Background(), Options{Config: tt.cfg, Layout: tt.layout, Out: out, Kernel: tt.kernel, ModuleRoot: moduleRoot(t)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one naming %q", err, tt.want)
			}
			left, _ := os.ReadDir(parent)
			if len(left) != 0 {
				t.Errorf("left behind after a failed build: %v", left)
			}
		})
	}
}

// A directory that is not an earlier build is never replaced; an earlier
// build is, and a failed rebuild keeps it whole.
func TestBuildOutputDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs and filesystems")
	}
	buildtest.NeedTools(t)
	k := buildtest.FakeKernel(t)
	out := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(out, "precious"), []byte("x"), 0o644)
	_, err := Build(context.Background(), Options{Config: config.Demo(), Layout: ELF, Out: out, Kernel: k, ModuleRoot: moduleRoot(t)})
	if err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(out, "precious")); err != nil {
		t.Fatal("the user's file is gone")
	}
	os.RemoveAll(out)
	buildLayout(t, config.Demo(), ELF, out, k)
	if b, err := os.ReadFile(filepath.Join(out, outdir.StampFile)); err != nil || string(b) != stampText {
		t.Fatalf("the build is not stamped: %v %q", err, b)
	}
	before, _ := os.ReadFile(filepath.Join(out, outdir.ManifestFile))
	bad := config.Demo()
	bad.Packages = append(bad.Packages, "./no-such-service")
	if _, err := Build(context.Background(), Options{Config: bad, Layout: OFF2F, Out: out, Kernel: k, ModuleRoot: moduleRoot(t)}); err == nil {
		t.Fatal("a bad rebuild succeeded")
	}
	after, _ := os.ReadFile(filepath.Join(out, outdir.ManifestFile))
	if !bytes.Equal(before, after) {
		t.Fatal("a failed rebuild changed the earlier build")
	}
	buildLayout(t, config.Demo(), OFF2F, out, k)
	var im Image
	b, _ := os.ReadFile(filepath.Join(out, outdir.ManifestFile))
	if err := json.Unmarshal(b, &im); err != nil || im.Layout != OFF2F {
		t.Fatalf("rebuild did not replace the earlier build: %v %+v", err, im)
	}
	left, _ := os.ReadDir(filepath.Dir(out))
	if len(left) != 1 {
		t.Errorf("leftovers beside the output: %v", left)
	}
}
