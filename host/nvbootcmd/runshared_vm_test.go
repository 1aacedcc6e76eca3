package nvbootcmd

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// TestRunSharedText: two nvboot run -shared-text of one image at once,
// each with a -guest directory of its own. Both serve kv, each from its
// own state, both guests' nvinit see the store read-only; a run of the
// image on its own pmem is refused while they go on. After a power-off a
// guest's next run finds its own key again.
func TestRunSharedText(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU three times")
	}
	k := vmtest.Kernel(t)
	buildtest.NeedTools(t)
	dir := filepath.Join(t.TempDir(), "kv")
	if _, stderr, err := execute("build", "-kernel", k, "-o", dir); err != nil {
		t.Fatalf("build: %v\n%s", err, stderr)
	}
	guests := []string{filepath.Join(t.TempDir(), "g1"), filepath.Join(t.TempDir(), "g2")}
	urls := make([]string, len(guests))
	args := make([][]string, len(guests))
	runs := make([]*runProcess, len(guests))
	for i, g := range guests {
		port := freePort(t)
		urls[i] = fmt.Sprintf("http://127.0.0.1:%d", port)
		args[i] = []string{"-shared-text", "-guest", g, "-port", fmt.Sprintf("%d:8080", port), dir}
		runs[i] = startRun(t, args[i]...)
	}
	for i, r := range runs {
		r.expect("NVBOOT-MARK service-ready kv", 0)
		if !strings.Contains(r.out.String(), "text store: /dev/pmem0 is read-only") {
			t.Errorf("guest %d: nvinit did not see the store read-only:\n%s", i, r.out.String())
		}
		put(t, urls[i], "/kv/who", fmt.Sprintf("guest %d", i))
	}
	for i := range runs {
		if code, v, _ := kvGet(t, urls[i], "/kv/who"); code != 200 || v != fmt.Sprintf("guest %d", i) {
			t.Errorf("guest %d: GET /kv/who: %d %q, want its own key", i, code, v)
		}
	}
	if _, _, err := execute("run", dir); !errors.Is(err, appliance.ErrImageBusy) {
		t.Errorf("a run on the image's own pmem beside shared ones: %v, want ErrImageBusy", err)
	}
	for _, r := range runs {
		r.powerOff()
	}
	r := startRun(t, args[0]...)
	r.expect("NVBOOT-MARK service-ready kv", 0)
	if !strings.Contains(r.out.String(), "as its last run left it") {
		t.Errorf("the second run of guest 0 did not reuse its directory:\n%s", r.out.String())
	}
	if code, v, _ := kvGet(t, urls[0], "/kv/who"); code != 200 || v != "guest 0" {
		t.Errorf("guest 0 after a power-off: %d %q, want its key kept", code, v)
	}
	r.powerOff()
}

func put(t *testing.T, url, path, value string) {
	t.Helper()
	req, _ := http.NewRequest("PUT", url+path, strings.NewReader(value))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT %s%s: %d", url, path, resp.StatusCode)
	}
}
