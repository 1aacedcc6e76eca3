package nvbootcmd

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/update"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/internal/cli"
)

// TestStatusCommand asks the real endpoint (device/update's Server) what
// the appliance runs and what its puller wrote: in JSON and for a person;
// an appliance that does not pull says so; a wrong password is refused.
func TestStatusCommand(t *testing.T) {
	dir := t.TempDir()
	status := filepath.Join(dir, contract.PullStatusFile)
	os.WriteFile(status, []byte(`{"Repository":"10.0.2.2:5000/fleet/kv","Tag":"stable",
		"Running":{"Digest":"sha256:aaaa","Version":"1.1.0","Path":"deploy","Since":"2026-01-01T00:00:00Z"},
		"Refused":{"Digest":"sha256:bbbb","Version":"0.9.0","Reason":"a downgrade is refused","Since":"2026-01-01T00:00:00Z"},
		"LastPoll":"2026-01-01T00:00:05Z","Polled":"sha256:bbbb","LastError":"a downgrade is refused","LastErrorAt":"2026-01-01T00:00:05Z",
		"LastInstall":{"Digest":"sha256:aaaa","Version":"1.1.0","Path":"deploy","Result":"installed","Services":[{"Service":"kv","Result":"kept","Program":"/nv/text/programs/x","Text":"t","TextSent":true,"Previous":"/bin/kv","Downtime":120000000}],
			"Blobs":["sha256:cccc","sha256:dddd"],"Downloaded":3000000}}`), 0o644)
	srv := httptest.NewServer(&update.Server{Password: "pw", PullStatus: status})
	t.Cleanup(srv.Close)
	c := config.Demo()
	c.Update = &config.Update{HTTPPassword: "pw"}
	cfg := filepath.Join(dir, "appliance.json")
	if err := c.Write(cfg); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := execute("status", "-json", "-config", cfg, srv.URL)
	if err != nil {
		t.Fatalf("status -json: %v\n%s", err, stderr)
	}
	var r statusReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || r.Pull == nil || r.Pull.Running.Digest != "sha256:aaaa" || r.Features == nil {
		t.Fatalf("status -json: %v\n%s", err, stdout)
	}
	stdout, _, err = execute("status", "-config", cfg, srv.URL)
	for _, want := range []string{"pulls 10.0.2.2:5000/fleet/kv:stable", "running  sha256:aaaa (1.1.0) by deploy",
		"refused  sha256:bbbb (0.9.0): a downgrade is refused", "downloaded 2 blobs, 3000000 bytes", "kv: kept, down 120ms"} {
		if err != nil || !strings.Contains(stdout, want) {
			t.Errorf("status: %v, want %q in\n%s", err, want, stdout)
		}
	}
	// An appliance that does not pull.
	plain := httptest.NewServer(&update.Server{Password: "pw"})
	t.Cleanup(plain.Close)
	if stdout, _, err := execute("status", "-config", cfg, plain.URL); err != nil || !strings.Contains(stdout, "pulls no updates") {
		t.Errorf("an appliance that does not pull: %v\n%s", err, stdout)
	}
	c.Update.HTTPPassword = "wrong"
	c.Write(cfg)
	if _, _, err := execute("status", "-config", cfg, srv.URL); err == nil || !strings.Contains(err.Error(), "refused the password") {
		t.Errorf("a wrong password: %v", err)
	}
	for _, args := range [][]string{{"status", srv.URL}, {"status", "-config", cfg}, {"status", "-config", cfg, "ftp://x"}} {
		if _, _, err := execute(args...); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}
