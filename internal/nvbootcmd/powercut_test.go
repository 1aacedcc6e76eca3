package nvbootcmd

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/image/appliance"
	"github.com/nvboot/nvboot/image/config"
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
			got, err := heapProblem(srv.Client(), srv.URL)
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

// The image powercut builds runs kv with -check-on-open.
func TestPowercutImageChecksHeap(t *testing.T) {
	cfg := config.Demo()
	if err := checkOnOpen(cfg); err != nil {
		t.Fatal(err)
	}
	found := false
	for p, pc := range cfg.PackageConfig {
		if strings.HasSuffix(p, "/examples/kv") {
			found = slices.Contains(pc.CommandLineFlags, "-check-on-open")
		}
	}
	if !found {
		t.Fatalf("kv flags lack -check-on-open: %+v", cfg.PackageConfig)
	}
	if err := checkOnOpen(&config.Config{}); err == nil {
		t.Fatal("a config without kv: no error")
	}
}

// The config the -h example builds the image of a powercut DIR from is the
// demo with kv's heap check on.
func TestPowercutExampleConfig(t *testing.T) {
	got, err := config.Load("../../examples/powercut.json")
	if err != nil {
		t.Fatal(err)
	}
	want := config.Demo()
	if err := checkOnOpen(want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("examples/powercut.json is\n%+v\nwant the demo with -check-on-open:\n%+v", got, want)
	}
}

// An image DIR whose kv runs without -check-on-open (the image nvboot build
// -o out/demo makes) is refused before any boot, saying how to build one
// that fits; one built before image.json recorded the flags is let through
// (refused after its first boot).
func TestPowercutRefusesUncheckedImage(t *testing.T) {
	image := func(args []string) *appliance.Image {
		return &appliance.Image{Layout: appliance.OFF2F, Services: []appliance.ServiceInfo{
			{Name: "kv", Package: "github.com/nvboot/nvboot/examples/kv", Args: args, ForwardPort: 8080}}}
	}
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"-listen", ":8080", "-heap", "/nv/state/kv.heap"}, false},
		{[]string{}, false},
		{[]string{"-check-on-open=false"}, false},
		{[]string{"-check-on-open", "-check-on-open=0"}, false},
		{[]string{"--", "-check-on-open"}, false},
		{[]string{"-heap", "/nv/state/kv.heap", "-check-on-open"}, true},
		{[]string{"--check-on-open=true"}, true},
		{nil, true}, // not recorded: told after the first boot
	} {
		err := checksHeap("out/demo", image(c.args))
		if c.ok != (err == nil) {
			t.Errorf("flags %q: err %v", c.args, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "out/demo") || !strings.Contains(err.Error(), "examples/powercut.json")) {
			t.Errorf("flags %q: %v does not name the image and the way to build one", c.args, err)
		}
	}
	if err := checksHeap("x", &appliance.Image{}); err == nil || !strings.Contains(err.Error(), "ForwardPort") {
		t.Errorf("no service: %v", err)
	}

	// Through the command: refused at once, nothing booted.
	dir := filepath.Join(t.TempDir(), "demo")
	os.Mkdir(dir, 0o755)
	b, _ := json.Marshal(image([]string{"-listen", ":8080"}))
	os.WriteFile(filepath.Join(dir, appliance.ManifestFile), b, 0o644)
	_, _, err := execute("powercut", "-n", "1", dir)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "-check-on-open") {
		t.Errorf("powercut %s: %v", dir, err)
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
	if err := pc.checkAcked(srv.Client(), srv.URL, 0); err != nil {
		t.Fatal(err)
	}
	pc.ack("k1", "v1") // during boot 1, before its cut
	pc.ack("k2", "v2")
	if got, want := pc.progress(1, 3), "boot 1/3: 0 keys checked (0 lost so far), 0 heap checks failed; 2 writes acknowledged before the cut, checked at the next boot"; got != want {
		t.Errorf("after boot 1:\n got %q\nwant %q", got, want)
	}
	if err := pc.checkAcked(srv.Client(), srv.URL, 1); err != nil {
		t.Fatal(err)
	}
	if got, want := pc.progress(3, 3), "boot 3/3: 2 keys checked (1 lost so far), 0 heap checks failed"; got != want {
		t.Errorf("after the last boot:\n got %q\nwant %q", got, want)
	}
}
