package appliance

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
)

const gokrazyTestdata = "../config/testdata/gokrazy/everything"

// A gokrazy config's extra files land on the root tree: a file (relative
// to the config's directory), a directory copied whole with its link, the
// arch's tar before the plain one, literal contents; MountDevices' targets
// are made and /perm links to the state; gokrazy's /var and CA bundle
// paths are there besides every image's /etc.
func TestPlaceGokrazy(t *testing.T) {
	c, _, err := config.LoadWarn(filepath.Join(gokrazyTestdata, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	// /perm comes with the skeleton, which the prepare phase installs first.
	if err := installSkeleton("../../..", root); err != nil {
		t.Fatal(err)
	}
	b := &builder{Options: Options{Target: config.TargetPC, Config: c, ConfigDir: gokrazyTestdata}}
	if err := b.placeGokrazy(staging{root: root}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"etc/breakglass.authorized_keys": "ssh-ed25519 ",
		"etc/breakglass.d/policy":        "allow all\n",
		"etc/breakglass.d/sub/file":      "nested\n",
		"usr/share/bundle/share/readme":  "from-tar\n",
		"usr/share/bundle/arch":          "amd\n",
		"etc/serve.conf":                 "port 8080\n",
	} {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || !strings.Contains(string(got), want) {
			t.Errorf("/%s: %q %v, want %q", name, got, err, want)
		}
	}
	if l, err := os.Readlink(filepath.Join(root, "etc/breakglass.d/link")); err != nil || l != "policy" {
		t.Errorf("link in the directory: %q %v", l, err)
	}
	if l, err := os.Readlink(filepath.Join(root, "perm")); err != nil || l != "nv/state" {
		t.Errorf("/perm: %q %v", l, err)
	}
	if err := b.placeEtc(staging{root: root}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"etc/hosts": "127.0.0.1\tlocalhost everything\n", "etc/hostname": "everything\n"} {
		if got, err := os.ReadFile(filepath.Join(root, name)); err != nil || !strings.HasPrefix(string(got), want) {
			t.Errorf("/%s: %q %v, want %q", name, got, err, want)
		}
	}
	if l, err := os.Readlink(filepath.Join(root, "var")); err != nil || l != "perm/var" {
		t.Errorf("/var: %q %v", l, err)
	}
	if _, err := os.Stat(HostFiles[0].Host); err == nil {
		if l, err := os.Readlink(filepath.Join(root, "etc/ssl/ca-bundle.pem")); err != nil || l != "certs/ca-certificates.crt" {
			t.Errorf("gokrazy's CA bundle: %q %v, want a link to the image's", l, err)
		}
	}
	for _, d := range []string{"mnt/data", "mnt/usb"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			t.Errorf("mount point /%s: %v", d, err)
		}
	}
}

func tarOf(t *testing.T, entries ...*tar.Header) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(make([]byte, h.Size))
		}
	}
	tw.Close()
	p := filepath.Join(t.TempDir(), "x.tar")
	os.WriteFile(p, buf.Bytes(), 0o644)
	return strings.TrimSuffix(p, ".tar")
}

// An extra file never replaces what the build placed, and an archive
// cannot write outside the root tree, by ".." or through a link it made.
func TestPlaceGokrazyRefuses(t *testing.T) {
	outside := t.TempDir()
	for _, tc := range []struct {
		name string
		pc   config.GokrazyPackage
		want string
	}{
		{"over nvboot's file", config.GokrazyPackage{ExtraFileContents: map[string]string{"/etc/placed": "x"}}, "/etc/placed is already in the image"},
		{"link out", config.GokrazyPackage{ExtraFilePaths: map[string]string{"/opt": tarOf(t,
			&tar.Header{Name: "out", Typeflag: tar.TypeSymlink, Linkname: outside},
			&tar.Header{Name: "out/owned", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})}}, "path escapes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			os.MkdirAll(filepath.Join(root, "etc"), 0o755)
			os.WriteFile(filepath.Join(root, "etc/placed"), []byte("nvboot's"), 0o644)
			c := &config.Config{Packages: []string{"a/x"}, PackageConfig: map[string]config.PackageConfig{"a/x": {GokrazyPackage: tc.pc}}}
			err := (&builder{Options: Options{Target: config.TargetPC, Config: c}}).placeGokrazy(staging{root: root})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `PackageConfig["a/x"]`) {
				t.Errorf("error %v, want one naming the field and %q", err, tc.want)
			}
			if b, _ := os.ReadFile(filepath.Join(root, "etc/placed")); string(b) != "nvboot's" {
				t.Errorf("the build's file became %q", b)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("written outside the root: %v", ents)
			}
		})
	}
	// ".." in an archive stays inside the destination.
	root := t.TempDir()
	c := &config.Config{Packages: []string{"a/x"}, PackageConfig: map[string]config.PackageConfig{"a/x": {GokrazyPackage: config.GokrazyPackage{
		ExtraFilePaths: map[string]string{"/opt": tarOf(t, &tar.Header{Name: "../../../up", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})}}}}}
	if err := (&builder{Options: Options{Target: config.TargetPC, Config: c}}).placeGokrazy(staging{root: root}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "opt/up")); err != nil {
		t.Errorf("../../../up not placed as /opt/up: %v", err)
	}
}

// An import path outside nvboot's module builds in the instance's
// builddir, found from the package's own directory up, as gokrazy looks.
func TestImportDir(t *testing.T) {
	cfgDir := t.TempDir()
	mod := filepath.Join(cfgDir, "builddir", "github.com", "gokrazy")
	os.MkdirAll(mod, 0o755)
	os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module gokrazy/build\n"), 0o644)
	b := &builder{Options: Options{Target: config.TargetPC, ModuleRoot: "/src/nvboot", ConfigDir: cfgDir}}
	for pkg, want := range map[string]string{
		"github.com/gokrazy/breakglass/cmd/x":  mod,
		"github.com/nvboot/nvboot/examples/kv": "/src/nvboot",
	} {
		if got, err := b.importDir(context.Background(), "x", pkg); err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", pkg, got, err, want)
		}
	}
}
