package appliance

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/derive"
)

// TestRootfsApplianceConfig holds rootfs/appliance/etc, what Buildroot and
// Yocto install, to what nvboot build writes for
// rootfs/appliance/appliance.json: nvinit's config.json and the /etc files
// that follow from the config (EtcFiles: hosts, hostname, resolv.conf).
// The three builders describe one appliance, and the files cannot drift
// from the image config. Regenerate with
// NVBOOT_UPDATE=1 go test -run TestRootfsApplianceConfig ./host/image/appliance.
func TestRootfsApplianceConfig(t *testing.T) {
	dir := filepath.Join(moduleRoot(t), "rootfs", "appliance")
	cfg, err := config.Load(filepath.Join(dir, "appliance.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Pooled() {
		t.Fatal("appliance.json has a pooled service: install poold.json too (and teach this test)")
	}
	dev, err := derive.FromImage(cfg, derive.Options{BinDir: contract.BinDir, TextStore: true})
	if err != nil {
		t.Fatal(err)
	}
	init, err := json.MarshalIndent(dev.Init, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{contract.InitConfigPath[1:]: append(init, '\n')}
	for name, body := range EtcFiles(cfg) {
		files[name] = []byte(body)
	}
	for name, want := range files {
		path := filepath.Join(dir, name)
		if os.Getenv("NVBOOT_UPDATE") == "1" {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what nvboot build writes for appliance.json (NVBOOT_UPDATE=1 regenerates it):\ngot:\n%s\nwant:\n%s", path, got, want)
		}
	}
}

// TestPlaceEtc: every image's /etc has localhost and the hostname on both
// loopback addresses, the config's nameservers (QEMU's by default, none
// on a network of one's own), the hostname, and the build host's CA
// certificates and services; an extra file of the same path wins.
func TestPlaceEtc(t *testing.T) {
	static := []config.Interface{{Name: "eth0", Address: "192.168.1.20/24", Gateway: "192.168.1.1"}}
	for _, tc := range []struct {
		name   string
		c      config.Config
		want   map[string]string // file: lines it must hold
		absent map[string]string // file: text it must not hold
	}{
		{"default", config.Config{}, map[string]string{
			"etc/hosts":       "127.0.0.1\tlocalhost nvboot\n::1\tlocalhost nvboot\n",
			"etc/hostname":    "nvboot\n",
			"etc/resolv.conf": "nameserver 10.0.2.3\n",
		}, nil},
		{"own network", config.Config{Hostname: "edge", Interfaces: static, Nameservers: []string{"192.168.1.1", "2001:db8::53"}}, map[string]string{
			"etc/hosts":       "127.0.0.1\tlocalhost edge\n::1\tlocalhost edge\n",
			"etc/hostname":    "edge\n",
			"etc/resolv.conf": "nameserver 192.168.1.1\nnameserver 2001:db8::53\n",
		}, nil},
		{"no nameserver", config.Config{Interfaces: static}, nil, map[string]string{"etc/resolv.conf": "nameserver"}},
		{"extra file wins", config.Config{Packages: []string{"a/x"}, PackageConfig: map[string]config.PackageConfig{"a/x": {
			GokrazyPackage: config.GokrazyPackage{ExtraFileContents: map[string]string{"/etc/resolv.conf": "nameserver 192.0.2.53\n"}}}}},
			map[string]string{"etc/resolv.conf": "nameserver 192.0.2.53\n"}, map[string]string{"etc/resolv.conf": "10.0.2.3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := installSkeleton(moduleRoot(t), root); err != nil {
				t.Fatal(err)
			}
			b := &builder{Options: Options{Target: config.TargetPC, Config: &tc.c}}
			if err := b.placeGokrazy(staging{root: root}); err != nil {
				t.Fatal(err)
			}
			if err := b.placeEtc(staging{root: root}); err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got, err := os.ReadFile(filepath.Join(root, name)); err != nil || !strings.Contains(string(got), want) {
					t.Errorf("/%s: %q %v, want %q in it", name, got, err, want)
				}
			}
			for name, not := range tc.absent {
				if got, err := os.ReadFile(filepath.Join(root, name)); err != nil || strings.Contains(string(got), not) {
					t.Errorf("/%s: %q %v, want no %q in it", name, got, err, not)
				}
			}
			for _, f := range HostFiles {
				want, err := os.ReadFile(f.Host)
				if err != nil {
					t.Logf("%s: %v (not on this host: not checked)", f.Host, err)
					continue
				}
				if got, err := os.ReadFile(filepath.Join(root, f.Image)); err != nil || !bytes.Equal(got, want) {
					t.Errorf("/%s: %d bytes %v, want the build host's %s (%d bytes)", f.Image, len(got), err, f.Host, len(want))
				}
			}
		})
	}
}

// TestInstallSkeleton: the skeleton's directories are made, its .empty
// placeholders are not copied.
func TestInstallSkeleton(t *testing.T) {
	root := t.TempDir()
	if err := installSkeleton(moduleRoot(t), root); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"sbin", "lib", "etc/nvboot", "proc", "sys", "dev", "nv/text", "nv/state"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s: not a directory (%v)", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "dev", ".empty")); !os.IsNotExist(err) {
		t.Errorf("dev/.empty copied (%v)", err)
	}
	if err := installSkeleton(t.TempDir(), root); err == nil {
		t.Error("a module root without rootfs/skeleton: no error")
	}
}
