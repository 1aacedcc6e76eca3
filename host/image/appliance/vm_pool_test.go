package appliance

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// TestAppliancePooledService boots, once, an appliance whose only service
// has a Pool: the image runs poold as a service, nvinit starts the service
// through it, and the service answers over the forwarded port. The probe
// reports the service's parent, which must be poold (a service nvinit
// forked itself would have nvinit as its parent).
func TestAppliancePooledService(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	buildtest.NeedTools(t)
	k := vmtest.Kernel(t)
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	pooled, probe := abs("testdata/pooled"), abs("testdata/probe")
	cfg := &config.Config{Packages: []string{pooled, probe}, PackageConfig: map[string]config.PackageConfig{
		pooled: {CommandLineFlags: []string{"-addr", ":8080"}, ForwardPort: 8080,
			Pool: &config.Pool{MinIdle: 1}},
		probe: {CommandLineFlags: []string{"-service", "pooled", "-addr", "127.0.0.1:8080"}},
	}}
	dir := filepath.Join(t.TempDir(), "img")
	im := buildLayout(t, cfg, OFF2F, dir, k)
	pm := t.TempDir()
	if err := CopyPmem(dir, im, pm); err != nil {
		t.Fatal(err)
	}
	b := bootImage(t, dir, pm)
	if b.probe.ServiceParent != "poold" {
		t.Errorf("the pooled service's parent is %q, want poold\nconsole:\n%s", b.probe.ServiceParent, b.m.Console())
	}
	if code, body := b.do(t, "GET", "/", ""); code != http.StatusOK || strings.TrimSpace(body) != "pooled" {
		t.Errorf("GET /: %d %q, want 200 \"pooled\"", code, body)
	}
	b.poweroff(t)
}
