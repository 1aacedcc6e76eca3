package nvbootcmd

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/format/fsdax"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// nvboot build over an image whose state a device has written keeps it and
// says so, on stderr and in -json's Kept; a build that cannot keep it
// refuses, naming pmem-state.img and -discard-state, which then starts
// from a blank state (-json's Discarded).
func TestBuildKeepsState(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs and filesystems")
	}
	buildtest.NeedTools(t)
	root, _ := filepath.Abs("../..")
	k := buildtest.FakeKernel(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	state := filepath.Join(out, outdir.StatePmemFile)
	build := func(args ...string) (res struct{ Kept, Discarded []string }, stderr string, err error) {
		t.Helper()
		stdout, stderr, err := execute(append([]string{"build", "-src", root, "-kernel", k, "-layout", "elf", "-json", "-o", out}, args...)...)
		if err == nil {
			if jerr := json.Unmarshal([]byte(stdout), &res); jerr != nil {
				t.Fatalf("-json: %v\n%s", jerr, stdout)
			}
			if !strings.Contains(stdout, `"TextBytes"`) {
				t.Errorf("-json lacks image.json's fields:\n%s", stdout)
			}
		}
		return res, stderr, err
	}
	if _, stderr, err := build(); err != nil {
		t.Fatalf("build: %v\n%s", err, stderr)
	}
	// The device wrote its state (kv's heap).
	src := filepath.Join(dir, "kv.heap")
	os.WriteFile(src, []byte("224 keys"), 0o644)
	if b, err := exec.Command("debugfs", "-w", "-R", "write "+src+" kv.heap", fmt.Sprintf("%s?offset=%d", state, fsdax.Align)).CombinedOutput(); err != nil {
		t.Fatalf("debugfs: %v\n%s", err, b)
	}
	used, _ := os.ReadFile(state)

	res, stderr, err := build()
	if err != nil {
		t.Fatalf("rebuild: %v\n%s", err, stderr)
	}
	if now, _ := os.ReadFile(state); string(now) != string(used) {
		t.Error("the rebuild replaced the device's state")
	}
	if !slices.Contains(res.Kept, outdir.StatePmemFile) || !strings.Contains(stderr, "kept "+outdir.StatePmemFile) {
		t.Errorf("Kept %v; stderr:\n%s", res.Kept, stderr)
	}

	cfg := filepath.Join(dir, "big.json")
	os.WriteFile(cfg, []byte(`{"Packages": ["github.com/nvboot/nvboot/examples/kv"], "StateMiB": 256}`), 0o644)
	if _, _, err := build("-config", cfg); err == nil || !strings.Contains(err.Error(), outdir.StatePmemFile) || !strings.Contains(err.Error(), "-discard-state") {
		t.Fatalf("incompatible rebuild: err %v, want pmem-state.img and -discard-state named", err)
	}
	if now, _ := os.ReadFile(state); string(now) != string(used) {
		t.Error("the refused rebuild changed the device's state")
	}
	res, stderr, err = build("-config", cfg, "-discard-state")
	if err != nil {
		t.Fatalf("rebuild -discard-state: %v\n%s", err, stderr)
	}
	if !slices.Equal(res.Discarded, []string{outdir.StatePmemFile}) || !strings.Contains(stderr, "discarded") {
		t.Errorf("Discarded %v; stderr:\n%s", res.Discarded, stderr)
	}
	if st, _ := os.Stat(state); st == nil || st.Size() != 256<<20 {
		t.Errorf("state after -discard-state: %v", st)
	}
}
