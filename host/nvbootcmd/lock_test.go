package nvbootcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
)

// run and powercut boot an image in place, and build replaces it: each takes
// the image directory's lock first, and one held elsewhere (here flock(1),
// standing in for a running nvboot run) is an error naming the directory and
// the holder, before anything is started or built.
func TestImageInUse(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1)")
	}
	dir := filepath.Join(t.TempDir(), "img")
	os.Mkdir(dir, 0o755)
	im := appliance.Image{Layout: appliance.OFF2F, Kernel: outdir.KernelFile, Disk: outdir.DiskFile,
		Pmem: []string{outdir.TextPmemFile, outdir.StatePmemFile},
		Services: []appliance.ServiceInfo{{Name: "kv", ForwardPort: 8080, Args: []string{"-check-on-open"},
			Checker: &config.Checker{Values: "/kv/", Check: "/stats"}}}}
	b, _ := json.Marshal(im)
	os.WriteFile(filepath.Join(dir, outdir.ManifestFile), b, 0o644)
	os.WriteFile(filepath.Join(dir, outdir.StampFile), nil, 0o644)
	holder := exec.Command("flock", "-x", dir, "sleep", "600")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	want := fmt.Sprintf("process %d (flock", holder.Process.Pid)
	for i := 0; ; i++ {
		unlock, err := appliance.LockImage(dir)
		if err == nil {
			unlock()
		} else if strings.Contains(err.Error(), want) {
			break
		}
		if i == 1000 {
			t.Fatal("flock never held the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, args := range [][]string{
		{"run", "-accel", "tcg", dir},
		{"powercut", "-n", "1", dir},
		{"build", "-o", dir, "-src", "/nonexistent"},
	} {
		_, stderr, err := execute(args...)
		if !errors.Is(err, appliance.ErrImageBusy) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), want) {
			t.Errorf("nvboot %q: err %v, want the directory and %q named", args, err, want)
		}
		if strings.Contains(stderr, "poweroff") || strings.Contains(stderr, "building") {
			t.Errorf("nvboot %q: went ahead:\n%s", args, stderr)
		}
	}
}
