package nvbootcmd

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

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
	v2 := deployConfig(t, cfgDir, false, kvPackage, kvVersion("2"))
	broken := deployConfig(t, cfgDir, false, filepath.Join(root, "host/nvbootcmd/testdata/deploy/broken/kv"))
	hang := deployConfig(t, cfgDir, false, filepath.Join(root, "host/nvbootcmd/testdata/deploy/hang/kv"))

	m, kvURL, upURL := bootDeployable(t, dir, im, false)
	kvPut(t, kvURL, "/kv/greeting", "written before the deploys")
	r, stderr, err := deployJSON(t, m, root, upURL, v2)
	if err != nil || r.Result != contract.DeployKept || !strings.HasPrefix(r.Program, contract.ELFDeployDir+"/programs/") || r.BytesSent < 1<<20 {
		t.Fatalf("deploy of version 2: %+v, %v\nstderr:\n%s\nconsole:\n%s", r, err, stderr, m.Console())
	}
	if !strings.Contains(stderr, "the whole static program") {
		t.Errorf("deploy did not say it sends the whole program:\n%s", stderr)
	}
	t.Logf("kept: %d bytes sent, ready %v, down %v", r.BytesSent, r.Ready, r.Downtime)
	wantKV(t, m, kvURL, "2", "written before the deploys", "after the deploy")
	r, stderr, err = deployJSON(t, m, root, upURL, broken)
	if !errors.Is(err, ErrRolledBack) || r.Result != contract.DeployRolledBack || !strings.Contains(r.Reason, "exited with status 1") {
		t.Fatalf("deploy of the broken kv: %+v, %v\nstderr:\n%s\nconsole:\n%s", r, err, stderr, m.Console())
	}
	if code, _, ver := kvGet(t, kvURL, "/healthz"); code != 200 || ver != "2" {
		t.Fatalf("after the rollback kv answers %d, version %q; want version 2", code, ver)
	}
	r, stderr, err = deployJSON(t, m, root, upURL, v2)
	if err != nil || r.Result != contract.DeployUnchanged {
		t.Fatalf("deploy of version 2 again: %+v, %v\nstderr:\n%s", r, err, stderr)
	}
	stdout, stderr, err := execute("deploy", "-gc", "-json", "-config", v2, upURL)
	var gc contract.GCResult
	if err != nil || json.Unmarshal([]byte(stdout), &gc) != nil || len(gc.Removed) != 1 || !strings.HasPrefix(gc.Removed[0], contract.ELFDeployDir+"/programs/") {
		t.Fatalf("gc: %v, %s\nstderr:\n%s", err, stdout, stderr)
	}

	// The power cut during a trial.
	m, kvURL, err = cutDuringTrial(t, m, dir, im, false, hang, root, upURL)
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("deploy cut during its trial: %v; want the outcome unknown", err)
	}
	wantKV(t, m, kvURL, "2", "written before the deploys", "after the cut (the kept version)")
}
