package update

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/off2f"
)

func TestProgramsRecover(t *testing.T) {
	dir := t.TempDir()
	m := &lockedMounter{}
	p := &Programs{Store: contract.TextStore{Device: "pmem0", Dir: dir}, Mounter: m}
	if back, err := p.recoverTrials(); err != nil || back != nil || m.log() != "" {
		t.Fatalf("Recover with no services dir: %v %v, mounts %q: want nothing done", back, err, m.log())
	}
	// A power cut after the switch: the new link and the trial link.
	if err := p.switchTo("kv", "/nv/text/programs/new", "/bin/kv"); err != nil {
		t.Fatal(err)
	}
	if got := p.Current("kv", "/bin/kv"); got != "/nv/text/programs/new" {
		t.Fatalf("Current after Switch = %q", got)
	}
	if _, err := p.gc(); err == nil || !strings.Contains(err.Error(), "on trial") {
		t.Errorf("gc during a trial: %v, want refused", err)
	}
	back, err := p.recoverTrials()
	if err != nil || len(back) != 1 || back[0] != "kv" {
		t.Fatalf("Recover = %v, %v; want kv switched back", back, err)
	}
	if got := p.Current("kv", "/bin/kv"); got != "/bin/kv" {
		t.Errorf("Current after Recover = %q, want the old program", got)
	}
	if _, err := os.Lstat(p.Link("kv") + contract.TrialSuffix); !os.IsNotExist(err) {
		t.Errorf("the trial link is still there: %v", err)
	}
	// A kept program is not undone.
	p.switchTo("kv", "/nv/text/programs/new", "/bin/kv")
	p.keep("kv")
	if back, err := p.recoverTrials(); err != nil || back != nil {
		t.Errorf("Recover after Keep = %v, %v; want nothing", back, err)
	}
	if got := p.Current("kv", "/bin/kv"); got != "/nv/text/programs/new" {
		t.Errorf("Current after Keep and Recover = %q", got)
	}
}

// An upload cut by a power cut leaves its text in uploads/, under no
// text's name: the next boot removes it before any service starts (and
// writes nothing when there is none), and so does a gc.
func TestInterruptedUploadRemoved(t *testing.T) {
	dir := t.TempDir()
	m := &lockedMounter{}
	p := &Programs{Store: contract.TextStore{Device: "pmem0", Dir: dir}, Mounter: m}
	p.UseDeployed(nil, t.Logf)
	if m.log() != "" {
		t.Fatalf("a boot with nothing to undo remounted the store: %s", m.log())
	}
	leave := func() {
		os.MkdirAll(p.uploadsDir(), 0o755)
		os.WriteFile(filepath.Join(p.uploadsDir(), "text"), []byte("half a text"), 0o600)
	}
	leave()
	p.UseDeployed(nil, t.Logf)
	if _, err := os.Stat(p.uploadsDir()); !os.IsNotExist(err) {
		t.Errorf("after the boot, uploads/ is still there: %v", err)
	}
	if windows(t, m.log()) != 1 {
		t.Errorf("remounts: %s, want one read-write window", m.log())
	}
	leave()
	if err := off2f.WriteManifest(filepath.Join(dir, off2f.ManifestName), []string{strings.Repeat("a", 64)}); err != nil {
		t.Fatal(err)
	}
	res, err := p.gc()
	if err != nil || len(res.Removed) != 1 || res.Removed[0] != filepath.Join(p.uploadsDir(), "text") || res.Bytes != int64(len("half a text")) {
		t.Errorf("gc = %+v, %v; want the staged text removed", res, err)
	}
	if _, err := os.Stat(p.uploadsDir()); !os.IsNotExist(err) {
		t.Errorf("after the gc, uploads/ is still there: %v", err)
	}
}
