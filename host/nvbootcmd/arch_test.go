package nvbootcmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
)

// The commands that boot an image refuse a Raspberry Pi one, naming the
// Pi, before QEMU starts (arm64-virt images boot on QEMU's virt board;
// QEMU's raspi3b runs no Pi firmware), and a Pi config before anything is
// built. deploy builds for the config's target and refuses an appliance of
// another machine before anything is sent.
func TestPiImagesAreRefusedByName(t *testing.T) {
	dir, im := slotImage(t, "arm64")
	im.Target = config.TargetRPi
	b, _ := json.Marshal(im)
	os.WriteFile(filepath.Join(dir, outdir.ManifestFile), b, 0o644)
	for _, args := range [][]string{{"run", dir}, {"powercut", dir}} {
		_, _, err := execute(args...)
		if err == nil || !strings.Contains(err.Error(), "built for arm64 (target arm64-rpi") || !strings.Contains(err.Error(), "Raspberry Pi") {
			t.Errorf("%s of a Pi image: %v, want a refusal naming the Pi", args[0], err)
		}
	}
	if _, _, err := execute("powercut", "-arch", "arm64", dir); err == nil || !strings.Contains(err.Error(), "built already") {
		t.Errorf("powercut -arch with an image directory: %v, want a refusal", err)
	}
	pi := filepath.Join(t.TempDir(), "pi.json")
	os.WriteFile(pi, []byte(`{"Packages": ["github.com/nvboot/nvboot/examples/kv"], "Environment": ["GOARCH=arm64"], "FirmwarePackage": "github.com/gokrazy/firmware",
		"PackageConfig": {"github.com/nvboot/nvboot/examples/kv": {"ForwardPort": 8080, "Checker": {"Values": "/kv/", "Check": "/stats"}}}}`), 0o644)
	for _, args := range [][]string{{"measure", "-config", pi}, {"powercut", "-config", pi}} {
		_, _, err := execute(args...)
		if err == nil || !strings.Contains(err.Error(), "target arm64-rpi") {
			t.Errorf("%s of a Pi config: %v, want a refusal naming the Pi before the build", args[0], err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(cfg, []byte(`{"Packages": ["github.com/nvboot/nvboot/examples/kv"], "Environment": ["GOARCH=arm64"], "Update": {"HTTPPassword": "`+updatePassword+`"},
		"PackageConfig": {"github.com/nvboot/nvboot/examples/kv": {"ForwardPort": 8080, "Checker": {"Values": "/kv/", "Check": "/stats"}}}}`), 0o644)
	a := newFakeAppliance(t)
	_, _, err := execute("deploy", "-service", "kv", "-config", cfg, a.srv.URL)
	if err == nil || !strings.Contains(err.Error(), "is amd64, and config "+cfg+" builds for arm64") {
		t.Errorf("deploy of an arm64 config to an amd64 appliance: %v", err)
	}
}
