package update

import (
	"os"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
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
