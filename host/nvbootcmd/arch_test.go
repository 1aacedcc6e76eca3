package nvbootcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The commands that boot an image refuse an arm64 one, naming its
// architecture, before QEMU starts: nvboot runs qemu-system-x86_64 only so
// far. deploy builds for the config's target and refuses an appliance of
// another machine before anything is sent.
func TestArm64ImagesAreRefusedByName(t *testing.T) {
	dir, _ := slotImage(t, "arm64")
	for _, args := range [][]string{{"run", dir}, {"powercut", dir}} {
		_, _, err := execute(args...)
		if err == nil || !strings.Contains(err.Error(), "built for arm64 (target arm64-virt") {
			t.Errorf("%s of an arm64 image: %v, want a refusal naming arm64", args[0], err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(cfg, []byte(`{"Packages": ["github.com/nvboot/nvboot/examples/kv"], "Environment": ["GOARCH=arm64"], "Update": {"HTTPPassword": "`+updatePassword+`"},
		"PackageConfig": {"github.com/nvboot/nvboot/examples/kv": {"ForwardPort": 8080, "Checker": {"Values": "/kv/", "Check": "/stats"}}}}`), 0o644)
	for _, args := range [][]string{{"measure", "-config", cfg}, {"powercut", "-config", cfg}} {
		_, _, err := execute(args...)
		if err == nil || !strings.Contains(err.Error(), "built for arm64 (target arm64-virt") {
			t.Errorf("%s of an arm64 config: %v, want a refusal naming arm64 before the build", args[0], err)
		}
	}
	a := newFakeAppliance(t)
	_, _, err := execute("deploy", "-service", "kv", "-config", cfg, a.srv.URL)
	if err == nil || !strings.Contains(err.Error(), "is amd64, and config "+cfg+" builds for arm64") {
		t.Errorf("deploy of an arm64 config to an amd64 appliance: %v", err)
	}
}
