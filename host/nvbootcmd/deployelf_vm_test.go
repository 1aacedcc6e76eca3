package nvbootcmd

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/appliance"
)

// TestDeployELFToBootedAppliance boots the demo built with the elf layout
// (no text store: the Pi's layout, here on x86-64 with its state on pmem)
// and deploys whole programs into its state: a changed kv (kept, its
// state intact), a kv that exits at start (rolled back), the changed kv
// again (unchanged), gc (the rolled-back program goes); then a kv that
// never becomes ready, with the power cut during its trial: the next boot
// undoes the trial and the kept kv serves, its writes there.
func TestDeployELFToBootedAppliance(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	cfgDir := t.TempDir()
	dir, im, root := buildDeployableAs(t, cfgDir, false, appliance.ELF)
	v2 := deployConfig(t, cfgDir, false, kvPackage, "-ldflags=-s -w -buildid= -X=main.version=2")
	broken := deployConfig(t, cfgDir, false, filepath.Join(root, "host/nvbootcmd/testdata/deploy/broken/kv"))
	hang := deployConfig(t, cfgDir, false, filepath.Join(root, "host/nvbootcmd/testdata/deploy/hang/kv"))

	m, kvURL, upURL := bootDeployable(t, dir, im, false)
	req, _ := http.NewRequest(http.MethodPut, kvURL+"/kv/greeting", strings.NewReader("written before the deploys"))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT: %v %v", resp, err)
	}
	deployJSON := func(cfg string) (deployReport, string, error) {
		t.Helper()
		stdout, stderr, err := execute("deploy", "-json", "-service", "kv", "-config", cfg, "-src", root, upURL)
		var r deployReport
		if jerr := json.Unmarshal([]byte(stdout), &r); jerr != nil {
			t.Fatalf("deploy -json printed %q (%v); stderr:\n%s\nerr %v\nconsole:\n%s", stdout, jerr, stderr, err, m.Console())
		}
		return r, stderr, err
	}
	r, stderr, err := deployJSON(v2)
	if err != nil || r.Result != contract.DeployKept || !strings.HasPrefix(r.Program, contract.ELFDeployDir+"/programs/") || r.BytesSent < 1<<20 {
		t.Fatalf("deploy of version 2: %+v, %v\nstderr:\n%s\nconsole:\n%s", r, err, stderr, m.Console())
	}
	if !strings.Contains(stderr, "the whole static program") {
		t.Errorf("deploy did not say it sends the whole program:\n%s", stderr)
	}
	t.Logf("kept: %d bytes sent, ready %v, down %v", r.BytesSent, r.Ready, r.Downtime)
	if code, _, ver := kvGet(t, kvURL, "/healthz"); code != 200 || ver != "2" {
		t.Fatalf("after the deploy kv answers %d, version %q; want version 2\n%s", code, ver, m.Console())
	}
	if code, v, _ := kvGet(t, kvURL, "/kv/greeting"); code != 200 || v != "written before the deploys" {
		t.Fatalf("state after the deploy: %d %q", code, v)
	}
	r, stderr, err = deployJSON(broken)
	if !errors.Is(err, ErrRolledBack) || r.Result != contract.DeployRolledBack || !strings.Contains(r.Reason, "exited with status 1") {
		t.Fatalf("deploy of the broken kv: %+v, %v\nstderr:\n%s\nconsole:\n%s", r, err, stderr, m.Console())
	}
	if code, _, ver := kvGet(t, kvURL, "/healthz"); code != 200 || ver != "2" {
		t.Fatalf("after the rollback kv answers %d, version %q; want version 2", code, ver)
	}
	r, stderr, err = deployJSON(v2)
	if err != nil || r.Result != contract.DeployUnchanged {
		t.Fatalf("deploy of version 2 again: %+v, %v\nstderr:\n%s", r, err, stderr)
	}
	stdout, stderr, err := execute("deploy", "-gc", "-json", "-config", v2, upURL)
	var gc contract.GCResult
	if err != nil || json.Unmarshal([]byte(stdout), &gc) != nil || len(gc.Removed) != 1 || !strings.HasPrefix(gc.Removed[0], contract.ELFDeployDir+"/programs/") {
		t.Fatalf("gc: %v, %s\nstderr:\n%s", err, stdout, stderr)
	}

	// The power cut during a trial.
	done := make(chan error, 1)
	go func() {
		_, _, err := execute("deploy", "-service", "kv", "-config", hang, "-src", root, "-deadline", "5m", upURL)
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := m.ExpectString(ctx, "kv: this build never listens"); err != nil {
		t.Fatalf("the hanging kv did not start: %v\n%s", err, m.Console())
	}
	m.Kill()
	<-m.Done()
	if err := <-done; !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("deploy cut during its trial: %v; want the outcome unknown", err)
	}
	m, kvURL, _ = bootDeployable(t, dir, im, false)
	if _, err := m.ExpectString(ctx, "kv: a deploy was interrupted before its new program was kept; running the old one"); err != nil {
		t.Errorf("no word of the undone trial: %v\n%s", err, m.Console())
	}
	if code, _, ver := kvGet(t, kvURL, "/healthz"); code != 200 || ver != "2" {
		t.Fatalf("after the cut kv answers %d, version %q; want the kept version 2", code, ver)
	}
	if code, v, _ := kvGet(t, kvURL, "/kv/greeting"); code != 200 || v != "written before the deploys" {
		t.Fatalf("state after the cut: %d %q", code, v)
	}
}
