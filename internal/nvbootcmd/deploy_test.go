package nvbootcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A config without Update.HTTPPassword builds an appliance with no update
// endpoint: deploy says so before it dials or builds anything.
func TestDeployNeedsThePassword(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.json")
	os.WriteFile(cfg, []byte(`{"Packages": ["github.com/nvboot/nvboot/examples/kv"]}`), 0o644)
	_, _, err := execute("deploy", "-service", "kv", "-config", cfg, "http://192.0.2.1")
	if err == nil || !strings.Contains(err.Error(), "no Update.HTTPPassword") || !strings.Contains(err.Error(), cfg) {
		t.Errorf("deploy with a config without a password: %v", err)
	}
}
