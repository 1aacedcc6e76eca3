package appliance

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/derive"
)

// TestRootfsApplianceConfig holds rootfs/appliance/etc/nvboot/config.json,
// the nvinit config Buildroot and Yocto install, to the one nvboot build
// writes for rootfs/appliance/appliance.json: the three builders describe one
// appliance, and the file cannot drift from the image config. Regenerate with
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
	want, err := json.MarshalIndent(dev.Init, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	path := filepath.Join(dir, contract.InitConfigPath[1:])
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
