package appliance

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// TestSharedTextStore: two guests of one image at once, both mapping the
// image's own pmem-text.img (SharedText), each with its own state. Both
// QEMUs map that one file; in both guests kv and nvinit run their text
// from it on DAX and kv answers from a state of its own; every way a root
// process tries to write the store fails (the device EPERM, a remount
// read-write and a new file refused), and even a write forced past the
// kernel (the region set read-write) leaves the host's file byte for byte.
func TestSharedTextStore(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU twice")
	}
	buildtest.NeedTools(t)
	k := vmtest.Kernel(t)
	cfg := probeConfig(t)
	for p, pc := range cfg.PackageConfig {
		if strings.HasSuffix(p, "testdata/probe") {
			pc.CommandLineFlags = append(pc.CommandLineFlags, "-try-store-write")
			cfg.PackageConfig[p] = pc
		}
	}
	dir := filepath.Join(t.TempDir(), "img")
	im := buildLayout(t, cfg, OFF2F, dir, k)
	text := filepath.Join(dir, outdir.TextPmemFile)
	before, err := sha256File(text)
	if err != nil {
		t.Fatal(err)
	}

	guests := make([]*booted, 2)
	for i := range guests {
		pm := t.TempDir()
		if err := CopyGuestPmem(dir, im, pm); err != nil {
			t.Fatal(err)
		}
		guests[i] = startWith(t, dir, im, BootOptions{PmemDir: pm, SharedText: true})
	}
	for i, g := range guests {
		g.waitProbe(t)
		g.checkOnPmem(t, true)
		if !strings.Contains(g.m.Console(), "text store: /dev/pmem0 is read-only (the host shares it among appliances)") {
			t.Errorf("guest %d: nvinit did not see the store read-only:\n%s", i, g.m.Console())
		}
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", g.m.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(maps), text) {
			t.Errorf("guest %d: QEMU does not map %s", i, text)
		}
		w := g.probe.StoreWrite
		for try, want := range map[string]string{"device": "operation not permitted", "remount": "permission denied",
			"create": "read-only file system", "forced": "written"} {
			if !strings.HasSuffix(w[try], want) {
				t.Errorf("guest %d: writing the store (%s): %q, want %q", i, try, w[try], want)
			}
		}
	}
	// Each keeps its own state.
	if code, _ := guests[0].do(t, "PUT", "/kv/who", "guest 0"); code != http.StatusNoContent {
		t.Fatalf("PUT on guest 0: %d", code)
	}
	if code, v := guests[1].do(t, "GET", "/kv/who", ""); code != http.StatusNotFound {
		t.Errorf("guest 1 sees guest 0's key: %d %q", code, v)
	}
	for _, g := range guests {
		g.poweroff(t)
	}
	if after, err := sha256File(text); err != nil || after != before {
		t.Errorf("%s changed under the guests (%v)", text, err)
	}
}
