package nvbootcmd

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
)

// Five real power cuts (SIGKILL of QEMU) while the host writes to kv on
// pheap: every acknowledged write must be there after each reboot.
func TestPowercut(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU six times")
	}
	if os.Getenv("NVBOOT_KERNEL") == "" {
		t.Skip("NVBOOT_KERNEL is not set (make test sets it)")
	}
	stdout, stderr, err := execute("powercut", "-n", "5", "-seed", "42", "-json")
	if err != nil {
		t.Fatalf("powercut: %v\n%s", err, stderr)
	}
	var res powercutResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("output %q: %v", stdout, err)
	}
	if res.Cuts != 5 || res.Lost != 0 || res.HeapChecks != 6 || res.HeapCheckFailures != 0 {
		t.Fatalf("result %+v", res)
	}
	if res.Acked == 0 {
		t.Fatalf("no write was acknowledged before the cuts: nothing was tested (%+v)", res)
	}
}

// Each boot's GET /stats decides whether the heap counts as consistent:
// only "check": "ok" does; a failed, skipped or missing check is a problem,
// and a /stats that cannot be read fails the boot.
func TestHeapProblem(t *testing.T) {
	for _, c := range []struct {
		name, body string
		code       int
		want       string // "" = consistent
		err        bool
	}{
		{"ok", `{"check":"ok","mode":"pheap/dax"}`, 200, "", false},
		{"failed", `{"check":"pheap: check: heap corrupt: block at 4096 has size 0"}`, 200, "heap check: pheap: check: heap corrupt", false},
		{"leak", `{"check":"12 live objects, 11 reachable from the kv root: 1 leaked"}`, 200, "1 leaked", false},
		{"off", `{"check":"off"}`, 200, "", true},
		{"missing", `{"mode":"log+fsync"}`, 200, "", true},
		{"not json", `oops`, 200, "", true},
		{"server error", `{}`, 500, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/stats" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(c.code)
				w.Write([]byte(c.body))
			}))
			defer srv.Close()
			got, err := heapProblem(srv.Client(), srv.URL, "/stats")
			if (err != nil) != c.err {
				t.Fatalf("error %v, want one: %v", err, c.err)
			}
			if unchecked := c.name == "off" || c.name == "missing"; unchecked != errors.Is(err, errHeapUnchecked) {
				t.Fatalf("error %v: unchecked heap %v", err, unchecked)
			}
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("problem %q, want %q", got, c.want)
			}
		})
	}
}

// A config without a Checker is refused before anything is built or
// booted (and before the kernel is looked up), naming the config and the
// field to add.
func TestPowercutConfigNeedsChecker(t *testing.T) {
	p := filepath.Join(t.TempDir(), "demo.json")
	if err := config.Demo().Write(p); err != nil {
		t.Fatal(err)
	}
	_, _, err := execute("powercut", "-n", "1", "-kernel", "/nonexistent/bzImage", "-config", p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "Checker") {
		t.Errorf("powercut -config %s: %v, want an error naming the config and Checker", p, err)
	}
	if _, _, err := execute("powercut", "-config", p, "out/x"); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("-config and DIR: %v", err)
	}
}

// The config powercut builds by default declares a Checker.
func TestPowercutDefaultConfigIsChecked(t *testing.T) {
	cfg, err := config.Load(filepath.Join("../..", defaultPowercutConfig))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := cfg.Checked(); !ok {
		t.Fatalf("%s has no Checker", defaultPowercutConfig)
	}
}

// An image DIR without a Checker (the image nvboot build -o out/demo makes)
// is refused before any boot, saying how to build one that fits.
func TestPowercutRefusesUncheckedImage(t *testing.T) {
	image := func(ch *config.Checker) *appliance.Image {
		return &appliance.Image{Layout: appliance.OFF2F, Services: []appliance.ServiceInfo{
			{Name: "kv", Package: "github.com/nvboot/nvboot/examples/kv", Args: []string{"-listen", ":8080"}, ForwardPort: 8080, Checker: ch}}}
	}
	for _, c := range []struct {
		ch *config.Checker
		ok bool
	}{
		{nil, false},
		{&config.Checker{Values: "/kv/", Check: "/stats"}, true},
	} {
		_, err := checkedService("out/demo", image(c.ch))
		if c.ok != (err == nil) {
			t.Errorf("checker %+v: err %v", c.ch, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "out/demo") || !strings.Contains(err.Error(), "examples/powercut.json")) {
			t.Errorf("checker %+v: %v does not name the image and the way to build one", c.ch, err)
		}
	}
	if _, err := checkedService("x", &appliance.Image{}); err == nil || !strings.Contains(err.Error(), "Checker") {
		t.Errorf("no service: %v", err)
	}

	// Through the command: refused at once, nothing booted.
	dir := filepath.Join(t.TempDir(), "demo")
	os.Mkdir(dir, 0o755)
	b, _ := json.Marshal(image(nil))
	os.WriteFile(filepath.Join(dir, outdir.ManifestFile), b, 0o644)
	_, _, err := execute("powercut", "-n", "1", dir)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "-check-on-open") {
		t.Errorf("powercut %s: %v", dir, err)
	}
}

// A Checker.Command decides from the host: exit 0 is consistent, another
// status is a problem carrying its output, and one that cannot run is an
// error (the image or config is wrong, not the device).
func TestCommandProblem(t *testing.T) {
	ctx := context.Background()
	ok := []string{"sh", "-c", `test "$NVBOOT_URL" = http://127.0.0.1:1`}
	if got, err := commandProblem(ctx, ok, "http://127.0.0.1:1"); got != "" || err != nil {
		t.Errorf("exit 0: %q, %v", got, err)
	}
	bad := []string{"sh", "-c", "echo 3 orders lost; exit 1"}
	if got, err := commandProblem(ctx, bad, "http://127.0.0.1:1"); err != nil || !strings.Contains(got, "3 orders lost") {
		t.Errorf("exit 1: %q, %v", got, err)
	}
	if got, err := commandProblem(ctx, []string{"/nonexistent/check"}, "x"); err == nil {
		t.Errorf("missing command: %q, no error", got)
	}
}

// The line after each boot counts what that boot checked, and apart the
// writes acknowledged after it, which the next boot checks: the first boot
// said "200 acknowledged writes checked" with nothing yet to check.
func TestPowercutProgress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/kv/k1":
			w.Write([]byte("v1"))
		case "/kv/k2":
			w.Write([]byte("old"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	pc := &cutter{acked: map[string]string{}, maybe: map[string][]string{}}
	if err := pc.checkAcked(srv.Client(), srv.URL+"/kv/", 0); err != nil {
		t.Fatal(err)
	}
	pc.ack("k1", "v1") // during boot 1, before its cut
	pc.ack("k2", "v2")
	if got, want := pc.progress(1, 3), "boot 1/3: 0 keys checked (0 lost so far), 0 heap checks failed; 2 writes acknowledged before the cut, checked at the next boot"; got != want {
		t.Errorf("after boot 1:\n got %q\nwant %q", got, want)
	}
	if err := pc.checkAcked(srv.Client(), srv.URL+"/kv/", 1); err != nil {
		t.Fatal(err)
	}
	if got, want := pc.progress(3, 3), "boot 3/3: 2 keys checked (1 lost so far), 0 heap checks failed"; got != want {
		t.Errorf("after the last boot:\n got %q\nwant %q", got, want)
	}
}
